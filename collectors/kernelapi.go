package collectors

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/kcrash/kcrash/internal/readas"
)

// KernelAPITail caps kernel-api.log: the last calls before a crash are what
// matter, and a level-3 log of a server can reach gigabytes.
var KernelAPITail int64 = 8 << 20

func init() {
	Register(Info{Name: "kernel-api", Description: "tail of every SGLang/FlashInfer kernel-API log file of the run, as kernel-api.log", Default: true},
		func() Collector { return kernelAPICollector{} })
}

type kernelAPICollector struct{}

// KernelAPIFiles expands the run's kernel-API log globs (per-pid %i files
// included), oldest modification first.
func KernelAPIFiles(globs []string) []string {
	seen := map[string]bool{}
	var files []string
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		for _, f := range m {
			if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return mtime(files[i]) < mtime(files[j]) })
	return files
}

// KernelAPIFilesAs is KernelAPIFiles with id's rights (OpenAs): the globs
// come from a job's environment, and root must not list for it the names in
// directories its user could not list.
func KernelAPIFilesAs(id *Identity, globs []string) []string {
	var files []string
	readas.Do(id, func() error {
		files = KernelAPIFiles(globs)
		return nil
	})
	return files
}

func mtime(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixNano()
}

func (kernelAPICollector) Collect(ctx context.Context, env *Env, out *Output) error {
	files := KernelAPIFilesAs(env.ReadAs, env.KernelAPILogs)
	if len(files) == 0 {
		return Skip("no kernel-API log was written")
	}
	// Each file gets a share of the cap; a file's tail starts at a line boundary.
	share := KernelAPITail / int64(len(files))
	var buf bytes.Buffer
	place := map[string]KernelAPIPlace{}
	for _, f := range files {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		tail, size, err := readTailLines(env.ReadAs, f, share)
		if err != nil {
			fmt.Fprintf(&buf, "==> %s: %v <==\n", f, err)
			continue
		}
		note := ""
		if int64(len(tail)) < size {
			note = fmt.Sprintf(" (last %d of %d bytes)", len(tail), size)
		}
		if len(files) > 1 {
			fmt.Fprintf(&buf, "==> %s%s <==\n", f, note)
		}
		if first, ok := firstLineOf(env.ReadAs, f, size-int64(len(tail))); ok {
			place[f] = KernelAPIPlace{BundleLine: bytes.Count(buf.Bytes(), []byte{'\n'}) + 1, FirstLine: first, Lines: bytes.Count(tail, []byte{'\n'}) + 1}
		}
		buf.Write(tail)
		if len(tail) > 0 && tail[len(tail)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	env.mu.Lock()
	env.kapiPlace = place
	env.mu.Unlock()
	return out.WriteFile("kernel-api.log", buf.Bytes())
}

// KernelAPIPlace is where a kernel-API log's kept tail sits in the
// bundle's kernel-api.log: a reader of the bundle has that file, not the
// run's work directory, which is gone.
type KernelAPIPlace struct {
	BundleLine int // kernel-api.log's line holding the tail's first line
	FirstLine  int // that line's number in the original file
	Lines      int // lines kept
}

// KernelAPILine maps line of the run's kernel-API log file to its line in
// the bundle's kernel-api.log; false when that line was not kept.
func (e *Env) KernelAPILine(file string, line int) (int, bool) {
	e.mu.Lock()
	p, ok := e.kapiPlace[file]
	e.mu.Unlock()
	if !ok || line < p.FirstLine || line >= p.FirstLine+p.Lines {
		return 0, false
	}
	return p.BundleLine + line - p.FirstLine, true
}

// firstLineOf is the line number of the byte at off in the file: 1 plus the
// newlines before it. Files read with another user's rights are not counted
// (their analysis reads the bundle's copy).
func firstLineOf(as *Identity, path string, off int64) (int, bool) {
	if off <= 0 {
		return 1, true
	}
	if as != nil {
		return 0, false
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	n, err := countLines(io.LimitReader(f, off))
	if err != nil {
		return 0, false
	}
	return n + 1, true
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 256<<10)
	n := 0
	for {
		m, err := r.Read(buf)
		n += bytes.Count(buf[:m], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// readTailLines is TailFile starting at a line: a tail cut mid-line would
// show the analyser half a call header.
func readTailLines(as *Identity, path string, max int64) ([]byte, int64, error) {
	tail := TailFile
	if as != nil {
		tail = func(p string, n int64) ([]byte, int64, error) { return TailFileAs(as, p, n) }
	}
	b, size, err := tail(path, max)
	if err == nil && size > max {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b, size, err
}
