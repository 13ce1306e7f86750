package bundle

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/internal/redact"
)

// DefaultBudget is the default cap on a bundle's size, compressed (SPEC §4).
const DefaultBudget = 50 << 20

// Name is the bundle's base name without extension:
// kcrash-<UTC YYYYMMDDTHHMMSSZ>-<host>-<pid>[-r<rank>].
func Name(t time.Time, host string, pid int, rank string) string {
	host = sanitize(host)
	n := fmt.Sprintf("kcrash-%s-%s-%d", t.UTC().Format("20060102T150405Z"), host, pid)
	if rank != "" {
		n += "-r" + sanitize(rank)
	}
	return n
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_':
			return r
		}
		return '_'
	}, s)
	if s == "" {
		return "unknown"
	}
	return s
}

// WriteOptions control how a Stage becomes a bundle file.
type WriteOptions struct {
	Out      string           // directory that receives the bundle
	Fallback string           // used when Out cannot take it; PrivateDir() when empty
	Budget   int64            // compressed size cap; DefaultBudget when 0
	Redactor *redact.Redactor // applied to every file, the manifest included
	// Report, when set, makes report.html (SPEC §4) from the staged files
	// once they are redacted and from the manifest as it will be written
	// (redacted), name being the bundle's: the page shows nothing the
	// bundle does not. A failure costs the page only, noted in the manifest.
	Report func(dir, name string, m *Manifest) ([]byte, error)
}

// Result says where a bundle went.
type Result struct {
	Path     string
	Size     int64
	Fallback error // non-nil when Out failed and the bundle went to Fallback instead
}

// Permissions of what a bundle write creates: readable by the group (a
// job's shared directory), never by the world.
const (
	fileMode = 0o640
	dirMode  = 0o750
)

// Write redacts the staged files, writes m as manifest.json, cuts the largest
// files until the compressed bundle fits the budget, and links one tar.gz
// into place under Out, or under Fallback when Out is unwritable or full.
// m.Truncated is filled in.
func (s *Stage) Write(m *Manifest, o WriteOptions) (Result, error) {
	if o.Budget <= 0 {
		o.Budget = DefaultBudget
	}
	if o.Redactor == nil {
		o.Redactor = redact.New(nil)
	}
	files, err := s.files()
	if err != nil {
		return Result{}, err
	}
	files, dropped := s.readable(files)
	// Uncompressed per-file cap before compression: logs compress ~5-10x, so
	// twice the compressed budget keeps the work bounded; the real cap is
	// applied to the compressed file below.
	capBytes := min(2*o.Budget, MaxEntry)
	truncated := map[string]bool{}
	for i, f := range files {
		if f.size > capBytes {
			truncated[f.name] = true
		}
		if err := redactInPlace(f.path, capBytes, o.Redactor, strings.HasSuffix(f.name, ".json")); err != nil {
			return Result{}, fmt.Errorf("redacting %s: %v", f.name, err)
		}
		if fi, err := os.Stat(f.path); err == nil {
			files[i].size = fi.Size()
		}
	}
	if o.Report != nil {
		if err := s.addReport(m, o); err != nil {
			m.Notes = append(m.Notes, "report.html not written: "+err.Error())
		}
		if files, err = s.files(); err != nil {
			return Result{}, err
		}
		files, dropped = s.readable(files)
	}
	if dropped > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("%d files left out: a bundle holds at most %d, with names up to %d bytes", dropped, MaxEntries-2, MaxName))
	}
	w := &archiver{stage: s, files: files, m: m, r: o.Redactor, budget: o.Budget, truncated: truncated, limit: map[string]int64{}}
	var res Result
	res.Path, res.Size, err = w.writeInto(o.Out)
	if err != nil {
		fb := o.Fallback
		if fb == "" {
			var ferr error
			if fb, ferr = PrivateDir(); ferr != nil {
				return Result{}, fmt.Errorf("%v; fallback: %v", err, ferr)
			}
		}
		if filepath.Clean(fb) == filepath.Clean(o.Out) {
			return Result{}, err
		}
		res.Fallback = err
		res.Path, res.Size, err = w.writeInto(fb)
		if err != nil {
			return Result{}, fmt.Errorf("%v; fallback %s: %w", res.Fallback, fb, err)
		}
	}
	return res, nil
}

// addReport writes report.html into the stage from its redacted files and
// a redacted copy of m; the page is scanned by the redactor once more.
func (s *Stage) addReport(m *Manifest, o WriteOptions) error {
	mj, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if red, err := o.Redactor.JSON(mj); err == nil {
		mj = red
	}
	var rm Manifest
	if err := json.Unmarshal(o.Redactor.Bytes(mj), &rm); err != nil {
		return err
	}
	page, err := o.Report(s.Dir, s.Name, &rm)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "report.html"), o.Redactor.Bytes(page), 0o640)
}

type stagedFile struct {
	name string
	path string
	size int64
	mode fs.FileMode
}

func (s *Stage) files() ([]stagedFile, error) {
	var files []stagedFile
	err := filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(s.Dir, p)
		if rel == "manifest.json" || ownFile(rel) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, stagedFile{name: filepath.ToSlash(rel), path: p, size: fi.Size(), mode: fi.Mode()})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return order(files[i].name) < order(files[j].name) })
	return files, err
}

// readable keeps the files a reader accepts (Open refuses a name past
// MaxName and more than MaxEntries entries): the top directory's entry and
// the manifest count, and the top directory may gain a "-N" suffix.
func (s *Stage) readable(files []stagedFile) ([]stagedFile, int) {
	kept := files[:0:0]
	for _, f := range files {
		if len(kept) < MaxEntries-2 && len(s.Name)+len("-999/")+len(f.name) <= MaxName {
			kept = append(kept, f)
		}
	}
	return kept, len(files) - len(kept)
}

// order puts the files a reader wants first at the front of the archive, so
// that `tar tzf | head` and streaming readers meet them early.
func order(name string) string {
	for i, first := range []string{"summary.md", "output.log", "kernel-api.log", "kmsg.log"} {
		if name == first {
			return fmt.Sprintf("%d", i)
		}
	}
	return "9" + name
}

// archiver writes a stage as tar.gz under the size budget.
type archiver struct {
	stage     *Stage
	files     []stagedFile
	m         *Manifest
	r         *redact.Redactor
	budget    int64
	truncated map[string]bool
	limit     map[string]int64 // bytes kept of a file (its tail), when cut to fit
}

// manifest encodes m with its string values redacted before encoding (a
// secret with & < > " is escaped by the encoder), then the encoded bytes
// scanned once more.
func (a *archiver) manifest() ([]byte, error) {
	a.m.Truncated = a.m.Truncated[:0:0]
	for n := range a.truncated {
		a.m.Truncated = append(a.m.Truncated, n)
	}
	sort.Strings(a.m.Truncated)
	mj, err := json.Marshal(a.m)
	if err != nil {
		return nil, err
	}
	if red, err := a.r.JSON(mj); err == nil {
		mj = red
	}
	return a.r.Bytes(mj), nil
}

// writeInto writes the bundle into out under the first free name. The top
// directory inside carries the same name (-2, -3... included), so bundles
// extracted side by side never mix their files.
func (a *archiver) writeInto(out string) (string, int64, error) {
	if err := os.MkdirAll(out, dirMode); err != nil {
		return "", 0, err
	}
	base := filepath.Join(out, a.stage.Name)
	for i := 1; i < 1000; i++ {
		top := a.stage.Name
		if i > 1 {
			top = fmt.Sprintf("%s-%d", a.stage.Name, i)
		}
		final := filepath.Join(out, top+".tar.gz")
		if _, err := os.Lstat(final); err == nil {
			continue
		}
		tmp, size, err := a.fit(out, top)
		if err != nil {
			return "", 0, err
		}
		err = link(tmp, final)
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			continue // taken since the Lstat: write again under the next name
		}
		if err != nil {
			return "", 0, err
		}
		return final, size, nil
	}
	return "", 0, fmt.Errorf("%s: too many bundles with this name", base+".tar.gz")
}

// link puts tmp at name, failing rather than replacing: concurrent writers
// into one shared directory can never overwrite each other's bundles.
func link(tmp, name string) error {
	err := os.Link(tmp, name)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// Filesystems without hard links: an exclusive create check then
	// rename; the window is tiny and names carry host and pid.
	if _, serr := os.Lstat(name); serr == nil {
		return fs.ErrExist
	}
	return os.Rename(tmp, name)
}

// fit writes the archive, and while it is over the budget cuts the largest
// files (by their compressed size) down to a common level and writes again.
func (a *archiver) fit(out, top string) (string, int64, error) {
	for attempt := 0; ; attempt++ {
		tmp, size, per, err := a.archive(out, top)
		if err != nil {
			return "", 0, err
		}
		if size <= a.budget || attempt == 8 {
			return tmp, size, nil
		}
		os.Remove(tmp)
		excess := size - a.budget + a.budget/64 + 8<<10
		a.cut(per, excess, attempt >= 4)
	}
}

// cut lowers the files' limits so that about excess compressed bytes go:
// the largest first, down to a level all cut files share ("water filling"),
// so one huge log loses more than several small ones. summary.md and
// report.html are kept (a page cut to its tail is no page).
func (a *archiver) cut(per map[string]entrySize, excess int64, hard bool) {
	type fc struct {
		name string
		es   entrySize
	}
	var l []fc
	for n, es := range per {
		if n != "summary.md" && n != "report.html" && es.raw > 0 {
			l = append(l, fc{n, es})
		}
	}
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i].es.packed > l[j].es.packed })
	var level, sum int64 = 0, 0
	for k := range l {
		sum += l[k].es.packed
		next := int64(0)
		if k+1 < len(l) {
			next = l[k+1].es.packed
		}
		if lv := (sum - excess) / int64(k+1); lv >= next {
			level = max(lv, 0)
			break
		}
	}
	for _, f := range l {
		if f.es.packed <= level {
			continue
		}
		keep := int64(float64(f.es.raw) * float64(level) / float64(f.es.packed) * 0.97)
		if hard {
			keep /= 2
		}
		a.limit[f.name] = max(keep, 0)
		a.truncated[f.name] = true
	}
}

// entrySize is one file's raw size and its share of the compressed archive.
type entrySize struct{ raw, packed int64 }

// countingWriter counts what reaches the file.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// archive writes one tar.gz into out under a temporary name; per is each
// file's compressed share (the compressor is flushed between files to measure it).
func (a *archiver) archive(out, top string) (string, int64, map[string]entrySize, error) {
	mj, err := a.manifest()
	if err != nil {
		return "", 0, nil, err
	}
	tmp, err := os.CreateTemp(out, ".kcrash-*.tar.gz.tmp")
	if err != nil {
		return "", 0, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(fileMode); err != nil {
		return "", 0, nil, err
	}
	bw := bufio.NewWriterSize(tmp, 256<<10)
	cw := &countingWriter{w: bw}
	gz, _ := gzip.NewWriterLevel(cw, gzip.DefaultCompression)
	tw := tar.NewWriter(gz)
	now := time.Now()
	per := map[string]entrySize{}
	mark := func(name string, raw int64, from int64) error {
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := gz.Flush(); err != nil {
			return err
		}
		per[name] = entrySize{raw: raw, packed: cw.n - from}
		return nil
	}
	if err := tw.WriteHeader(&tar.Header{Name: top + "/", Mode: dirMode, ModTime: now, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
		return "", 0, nil, err
	}
	addManifest := func() error {
		if err := tw.WriteHeader(&tar.Header{Name: top + "/manifest.json", Mode: fileMode, Size: int64(len(mj)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(mj)
		return err
	}
	wroteManifest := false
	for _, f := range a.files {
		// manifest.json goes right after summary.md: `kcrash show` reads only the head.
		if !wroteManifest && order(f.name) >= "1" {
			if err := addManifest(); err != nil {
				return "", 0, nil, err
			}
			wroteManifest = true
		}
		from := cw.n
		limit, cut := a.limit[f.name]
		if !cut {
			limit = -1
		}
		n, err := addFile(tw, top+"/"+f.name, f, now, limit)
		if err != nil {
			return "", 0, nil, err
		}
		if err := mark(f.name, n, from); err != nil {
			return "", 0, nil, err
		}
	}
	if !wroteManifest {
		if err := addManifest(); err != nil {
			return "", 0, nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return "", 0, nil, err
	}
	if err := gz.Close(); err != nil {
		return "", 0, nil, err
	}
	if err := bw.Flush(); err != nil {
		return "", 0, nil, err
	}
	if err := tmp.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return "", 0, nil, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return "", 0, nil, err
	}
	if err := tmp.Close(); err != nil {
		return "", 0, nil, err
	}
	ok = true
	return tmp.Name(), fi.Size(), per, nil
}

// addFile streams one redacted staged file into the archive: its last limit
// bytes when limit >= 0 (the end of a log is what explains a crash).
func addFile(tw *tar.Writer, name string, f stagedFile, now time.Time, limit int64) (int64, error) {
	src, err := os.Open(f.path)
	if err != nil {
		msg := []byte(fmt.Sprintf("kcrash: could not read staged file: %v\n", err))
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: fileMode, Size: int64(len(msg)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return 0, err
		}
		_, err = tw.Write(msg)
		return int64(len(msg)), err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if limit >= 0 && size > limit {
		if _, err := src.Seek(size-limit, io.SeekStart); err != nil {
			return 0, err
		}
		size = limit
	}
	mode := int64(f.mode.Perm()&fileMode | 0o400)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: size, ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return 0, err
	}
	_, err = io.CopyN(tw, src, size)
	return size, err
}

// redactChunk is how much of a staged file is redacted at a time: memory
// stays small however large the output ring is.
const redactChunk = 1 << 20

// jsonRedactMax is the largest JSON file whose string values are redacted
// one by one before the byte scan (which sees JSON escapes too).
const jsonRedactMax = 64 << 20

// redactInPlace rewrites a staged file with secrets masked, keeping only its
// last max bytes (the end of a log is what explains a crash). A JSON file has
// its string values redacted first (a secret's JSON escapes would hide it
// from a byte scan). Then the bytes are scanned in chunks that overlap by
// the longest secret (redact.MaxSecret), so a token straddling a cut is seen
// whole; a private-key block is kept whole up to 1 MiB.
func redactInPlace(path string, max int64, r *redact.Redactor, isJSON bool) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if isJSON && fi.Size() <= min(max, jsonRedactMax) {
		data, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		// Rewritten only when a value was masked: otherwise the file
		// (raw tool output included) keeps its bytes.
		if red, n, err := r.JSONCount(data); err == nil && n > 0 {
			return replace(path, r.Bytes(red))
		}
		if _, err := in.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	var src io.Reader = in
	if fi.Size() > max {
		if _, err := in.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return err
		}
		src = io.LimitReader(in, max)
	}
	out, err := os.CreateTemp(filepath.Dir(path), ".redact-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	bw := bufio.NewWriterSize(out, 256<<10)
	pending := make([]byte, 0, redactChunk+redact.MaxSecret)
	buf := make([]byte, redactChunk)
	first, eof := fi.Size() > max, false
	need := redactChunk
	for !eof || len(pending) > 0 {
		for !eof && (len(pending) < need || openKeyBlock(pending) && len(pending) < need+redactChunk) {
			n, err := src.Read(buf)
			pending = append(pending, buf[:n]...)
			if err == io.EOF {
				eof = true
			} else if err != nil {
				out.Close()
				return err
			}
		}
		if first {
			// The cut for max landed anywhere, maybe inside a secret whose
			// head is gone: drop up to the first line end.
			first = false
			if i := bytes.IndexByte(pending[:min(len(pending), redact.MaxSecret)], '\n'); i >= 0 {
				pending = pending[i+1:]
			}
		}
		// A secret that may go on past the piece is held back; one longer
		// than 4 pieces is masked as far as it goes.
		emit, used := r.Chunk(pending, eof || len(pending) >= 4*redactChunk)
		if _, err := bw.Write(emit); err != nil {
			out.Close()
			return err
		}
		pending = append(pending[:0], pending[used:]...)
		need = redactChunk
		if used == 0 {
			need = len(pending) + redactChunk
		}
		if eof {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(out.Name(), path)
}

// replace writes data over path through a temporary file.
func replace(path string, data []byte) error {
	out, err := os.CreateTemp(filepath.Dir(path), ".redact-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	if _, err := out.Write(data); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(out.Name(), path)
}

// openKeyBlock reports whether b ends inside a PEM private-key block.
func openKeyBlock(b []byte) bool {
	i := bytes.LastIndex(b, []byte("-----BEGIN "))
	return i >= 0 && !bytes.Contains(b[i:], []byte("-----END "))
}
