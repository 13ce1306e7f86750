package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/testenv"
)

// rawArchive returns every byte of every entry of a bundle file, for checks
// that must see the encoded bytes themselves.
func rawArchive(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

// A secret with & < > " survives encoding/json as \u0026...: it must be
// redacted as a value, in the manifest and in a collector's JSON alike.
func TestWriteRedactsValuesBeforeEncoding(t *testing.T) {
	secret := `hunter&2<x>"yz`
	procs, _ := json.Marshal(map[string]any{"processes": []map[string]any{{"pid": 1, "cmdline": []string{"sh", "-c", "exit 1", "sh", secret}}}})
	st := stageWith(t, map[string][]byte{"processes.json": procs, "output.log": []byte("said " + secret + "\n")})
	tri, _ := json.Marshal(map[string]any{"findings": []map[string]any{{"text": "arg " + secret}}, "next_steps": []string{"rerun with " + secret}})
	m := &Manifest{SchemaVersion: SchemaVersion, Command: []string{"sh", "-c", "exit 1", "sh", secret}, Triage: tri}
	res, err := st.Write(m, WriteOptions{Out: t.TempDir(), Redactor: redact.New([]string{"DB_PASSWORD=" + secret})})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range rawArchive(t, res.Path) {
		if bytes.Contains(data, []byte("hunter")) {
			t.Errorf("%s holds the secret: %s", name, data)
		}
	}
	if _, err := Open(res.Path); err != nil {
		t.Fatal(err)
	}
}

// A token straddling the 1 MiB redaction chunk of one long line.
func TestWriteTokenStraddlingChunkCut(t *testing.T) {
	tok := "hf_" + strings.Repeat("Ab3", 12)
	line := strings.Repeat("x", 1048555) + " " + tok + "\n"
	st := stageWith(t, map[string][]byte{"output.log": []byte(line)})
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: t.TempDir(), Redactor: redact.New([]string{"HF_TOKEN=" + tok})})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := b.File("output.log")
	if bytes.Contains(o, []byte("Ab3Ab3")) || !bytes.HasSuffix(o, []byte(" [REDACTED]\n")) || len(o) != 1048555+len(" [REDACTED]\n") {
		t.Fatalf("output.log tail %q (%d bytes)", o[max(0, len(o)-50):], len(o))
	}
}

// The budget caps the compressed file; the largest files go first.
func TestWriteBudgetIsCompressedCap(t *testing.T) {
	files := map[string][]byte{"summary.md": []byte("# verdict\n"), "small.txt": []byte("keep me\n")}
	for _, n := range []string{"a.bin", "b.bin", "c.bin", "d.bin"} {
		noise := make([]byte, 1536<<10)
		rand.Read(noise)
		files["raw/"+n] = noise
	}
	st := stageWith(t, files)
	const budget = 1 << 20
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: t.TempDir(), Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(res.Path)
	if fi.Size() > budget || res.Size != fi.Size() {
		t.Fatalf("bundle is %d bytes (reported %d), budget %d", fi.Size(), res.Size, budget)
	}
	b, err := Open(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(b.Manifest.Truncated, ","); got != "raw/a.bin,raw/b.bin,raw/c.bin,raw/d.bin" {
		t.Fatalf("truncated = %q", got)
	}
	if s, _ := b.File("small.txt"); string(s) != "keep me\n" {
		t.Fatalf("small file cut: %q", s)
	}
	if s, _ := b.File("summary.md"); string(s) != "# verdict\n" {
		t.Fatalf("summary cut: %q", s)
	}
	// what is kept of a cut file is its end
	a, _ := b.File("raw/a.bin")
	if len(a) == 0 || len(a) > 400<<10 || !bytes.HasSuffix(files["raw/a.bin"], a) {
		t.Fatalf("raw/a.bin kept %d bytes, not its tail", len(a))
	}
}

// Bundles renamed -2, -3 to avoid a collision hold a top directory of the
// same name, so extracting them side by side mixes nothing.
func TestWriteRenamedBundleTopDirMatches(t *testing.T) {
	out := t.TempDir()
	for i := 0; i < 3; i++ {
		st := stageWith(t, map[string][]byte{"output.log": []byte("x")})
		st.Name = "kcrash-same"
		res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: out})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSuffix(filepath.Base(res.Path), ".tar.gz"); b.Dir != want {
			t.Fatalf("%s holds directory %s", res.Path, b.Dir)
		}
	}
}

// A bundle may hold what redaction missed: never world-readable.
func TestWriteNotWorldReadable(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	out := filepath.Join(t.TempDir(), "shared", "bundles")
	st := stageWith(t, map[string][]byte{"output.log": []byte("x"), "raw/y.txt": []byte("y")})
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{res.Path, out, filepath.Dir(out)} {
		fi, _ := os.Stat(p)
		if fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s is %v", p, fi.Mode().Perm())
		}
	}
	f, _ := os.Open(res.Path)
	defer f.Close()
	gz, _ := gzip.NewReader(f)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Mode&0o007 != 0 {
			t.Errorf("entry %s has mode %o", h.Name, h.Mode)
		}
	}
	t.Setenv("TMPDIR", t.TempDir())
	os.Chmod(os.Getenv("TMPDIR"), 0o777)
	pd, err := PrivateDir()
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(pd); fi.Mode().Perm() != 0o700 {
		t.Fatalf("fallback %s is %v", pd, fi.Mode().Perm())
	}
	// a fallback write lands there, private
	st2 := stageWith(t, map[string][]byte{"output.log": []byte("x")})
	res, err = st2.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: "/proc/no/such/dir"})
	if err != nil || res.Fallback == nil || filepath.Dir(res.Path) != pd {
		t.Fatalf("fallback write: %v %v %s", err, res.Fallback, res.Path)
	}
}

// Staging happens next to the final place: an unusable $TMPDIR does not
// prevent the bundle.
func TestStageInOutNotTMPDIR(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("TMPDIR", "/proc/no/such/tmp")
	st, err := NewStage(out, "kcrash-x")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove()
	if filepath.Dir(st.Dir) != out {
		t.Fatalf("staged in %s", st.Dir)
	}
	if fi, _ := os.Stat(st.Dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("stage is %v", fi.Mode().Perm())
	}
	os.WriteFile(filepath.Join(st.Dir, "output.log"), []byte("x"), 0o600)
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: out})
	if err != nil || res.Fallback != nil || filepath.Dir(res.Path) != out {
		t.Fatalf("%v %v %s", err, res.Fallback, res.Path)
	}
	// --out unusable and $TMPDIR unusable: a clear error, not a panic
	if _, err := NewStage("/proc/no/such/out", "kcrash-x"); err == nil {
		t.Fatal("staging with nowhere to go succeeded")
	}
}

// zeroMembers is a gzip stream of n bytes of zeros made of identical
// members (gzip is multi-member): a huge entry in a tiny file, built fast.
func zeroMembers(t *testing.T, w io.Writer, n int64) {
	t.Helper()
	const member = 64 << 20
	var one bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	gz.Write(make([]byte, member))
	gz.Close()
	for ; n >= member; n -= member {
		w.Write(one.Bytes())
	}
	gz = gzip.NewWriter(w)
	gz.Write(make([]byte, n))
	gz.Close()
}

// WriteBomb writes a small bundle holding one entry of size bytes (zeros),
// then a valid manifest: the shape of a decompression bomb.
func writeBomb(t *testing.T, p, entry string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	tw.WriteHeader(&tar.Header{Name: "kcrash-bomb/" + entry, Mode: 0o600, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	tw.Flush()
	gz := gzip.NewWriter(f)
	gz.Write(hdr.Bytes())
	gz.Close()
	zeroMembers(t, f, size) // the entry's content, padded to 512 already when size%512==0
	var tail bytes.Buffer
	tw = tar.NewWriter(&tail)
	mj := []byte(`{"schema_version":1}`)
	tw.WriteHeader(&tar.Header{Name: "kcrash-bomb/manifest.json", Mode: 0o600, Size: int64(len(mj)), Typeflag: tar.TypeReg})
	tw.Write(mj)
	tw.Close()
	gz = gzip.NewWriter(f)
	gz.Write(tail.Bytes())
	gz.Close()
}

// A 3 MB bundle claiming a 3 GiB entry, or a 300 MB manifest, is refused
// with one line before anything is read into memory.
func TestOpenRefusesAbsurdSizes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		entry string
		size  int64
		want  string
	}{
		{"output.log", 3 << 30, "output.log claims 3.2 GB"},
		{"manifest.json", 300 << 20, "manifest.json claims 314.6 MB"},
	} {
		p := filepath.Join(dir, c.entry+".tar.gz")
		writeBomb(t, p, c.entry, c.size)
		if fi, _ := os.Stat(p); fi.Size() > 4<<20 {
			t.Fatalf("bomb is %d bytes", fi.Size())
		}
		start := time.Now()
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Open(%s) = %v", c.entry, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("refusing took %s", d)
		}
	}
}

func goodBundle(t *testing.T) string {
	t.Helper()
	st := stageWith(t, map[string][]byte{"summary.md": []byte("# native_crash, high confidence\n"), "output.log": bytes.Repeat([]byte("line of output\n"), 200)})
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion, Command: []string{"sh"}, Triage: json.RawMessage(`{"verdict":{"kind":"native_crash","confidence":"high"}}`)}, WriteOptions{Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return res.Path
}

// Every single-bit flip of a bundle either reads back exactly as before or
// is an error: the gzip checksum is verified.
func TestOpenDetectsBitFlips(t *testing.T) {
	p := goodBundle(t)
	orig, _ := os.ReadFile(p)
	want, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	flipped := filepath.Join(t.TempDir(), "flip.tar.gz")
	for i := 0; i < len(orig); i++ {
		bit := byte(1) << (i % 8)
		data := append([]byte(nil), orig...)
		data[i] ^= bit
		os.WriteFile(flipped, data, 0o600)
		b, err := Open(flipped)
		if err != nil {
			continue
		}
		for _, n := range want.Names() {
			x, _ := want.File(n)
			y, _ := b.File(n)
			if !bytes.Equal(x, y) {
				t.Fatalf("flip at byte %d bit %d read as valid with %s altered", i, i%8, n)
			}
		}
	}
}

func tarGz(t testing.TB, p string, files map[string]string, order []string) {
	t.Helper()
	f, _ := os.Create(p)
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, n := range order {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	gz.Close()
}

func TestOpenRefusesSecondTopDirAndUnknownSchema(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "two.tar.gz")
	tarGz(t, p, map[string]string{
		"kcrash-a/manifest.json": `{"schema_version":1,"host":{"hostname":"a"}}`,
		"kcrash-a/summary.md":    "a",
		"kcrash-b/summary.md":    "evil",
	}, []string{"kcrash-a/manifest.json", "kcrash-a/summary.md", "kcrash-b/summary.md"})
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), `second top-level directory "kcrash-b"`) {
		t.Fatalf("two top dirs: %v", err)
	}
	for _, v := range []string{`2`, `"1"`, `null`} {
		tarGz(t, p, map[string]string{"kcrash-a/manifest.json": `{"schema_version":` + v + `}`}, []string{"kcrash-a/manifest.json"})
		if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "schema_version") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("schema_version %s: %v", v, err)
		}
	}
}

// A FIFO named like a bundle is refused at once, not read (or waited on) forever.
func TestOpenFIFODoesNotHang(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kcrash-x.tar.gz")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Open(p); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
			t.Fatalf("Open(fifo) = %v", err)
		}
	case <-time.After(10 * time.Second):
		// unblock the stuck open so the test binary can finish
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("Open(fifo) hung")
	}
}

// FuzzOpen: no crafted archive makes the reader panic or accept a bundle
// without a manifest of the known schema.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	st, err := NewStage(dir, "kcrash-seed")
	if err != nil {
		f.Fatal(err)
	}
	os.WriteFile(filepath.Join(st.Dir, "summary.md"), []byte("# x\n"), 0o600)
	os.WriteFile(filepath.Join(st.Dir, "output.log"), []byte("hello\n"), 0o600)
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion, Command: []string{"a"}}, WriteOptions{Out: dir})
	if err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(res.Path)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0x1f, 0x8b})
	p := filepath.Join(dir, "fuzz.tar.gz")
	tarGz(f, p, map[string]string{"d/manifest.json": `{"schema_version":1}`, "e/x": "y"}, []string{"d/manifest.json", "e/x"})
	two, _ := os.ReadFile(p)
	f.Add(two)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "b.tar.gz")
		os.WriteFile(p, data, 0o600)
		if _, err := OpenOrArchive(p, func(name string, r io.Reader) error { _, err := ReadFunc(r, name, nil); return err }); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("OpenOrArchive: multi-line error: %q", err)
		}
		b, err := Open(p)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		if b.Manifest.SchemaVersion != SchemaVersion || b.Dir == "" {
			t.Fatalf("accepted %+v", b.Manifest)
		}
		if _, ok := b.File("manifest.json"); !ok {
			t.Fatal("accepted without manifest.json")
		}
	})
}

// A full $TMPDIR (a real full tmpfs) does not prevent the bundle: staging
// and writing happen in --out.
func TestFullTMPDIRStillBundles(t *testing.T) {
	testenv.NeedRoot(t, "mount a full tmpfs as $TMPDIR")
	full := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", full).CombinedOutput(); err != nil {
		testenv.Skip(t, "cannot mount tmpfs: %v %s", err, out)
	}
	defer syscall.Unmount(full, syscall.MNT_DETACH)
	filler, _ := os.Create(filepath.Join(full, "filler"))
	io.Copy(filler, io.LimitReader(zeroReader{}, 1<<20)) // until ENOSPC
	filler.Close()
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("TMPDIR", full)
	st, err := NewStage(out, "kcrash-full")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove()
	noise := make([]byte, 256<<10)
	rand.Read(noise)
	if err := os.WriteFile(filepath.Join(st.Dir, "output.log"), noise, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := st.Write(&Manifest{SchemaVersion: SchemaVersion}, WriteOptions{Out: out})
	if err != nil || res.Fallback != nil || filepath.Dir(res.Path) != out {
		t.Fatalf("%v %v %s", err, res.Fallback, res.Path)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A bundle re-packed with `tar -C DIR .` (a "./" root entry) still reads.
func TestOpenDotRootEntry(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dot.tar.gz")
	f, _ := os.Create(p)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "./", Mode: 0o755, Typeflag: tar.TypeDir})
	mj := `{"schema_version":1}`
	tw.WriteHeader(&tar.Header{Name: "./kcrash-a/manifest.json", Mode: 0o600, Size: int64(len(mj)), Typeflag: tar.TypeReg})
	tw.Write([]byte(mj))
	tw.Close()
	gz.Close()
	f.Close()
	if b, err := Open(p); err != nil || b.Dir != "kcrash-a" {
		t.Fatalf("Open = %v", err)
	}
}

// fuzzOpenBytes opens data as a bundle file and checks what any reader
// relies on: one-line errors, and an accepted bundle has a known manifest.
func fuzzOpenBytes(t *testing.T, data []byte) {
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, data, 0o600)
	b, err := Open(p)
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error: %q", err)
		}
		return
	}
	if b.Manifest.SchemaVersion != SchemaVersion || b.Dir == "" || strings.Contains(b.Dir, "/") || b.Dir == ".." {
		t.Fatalf("accepted dir %q manifest %+v", b.Dir, b.Manifest)
	}
	for _, n := range b.Names() {
		if strings.HasPrefix(n, "/") || strings.HasPrefix(n, "../") {
			t.Fatalf("accepted entry %q", n)
		}
	}
}

func gzipBytes(data []byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write(data)
	gz.Close()
	return buf.Bytes()
}

// FuzzOpenTar fuzzes the tar layer: the compressed fuzzer input of FuzzOpen
// almost never gets past the gzip checksum.
func FuzzOpenTar(f *testing.F) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, e := range []struct{ name, data string }{
		{"kcrash-a/summary.md", "# x\n"}, {"kcrash-a/manifest.json", `{"schema_version":1}`}, {"kcrash-a/raw/x", "y"},
	} {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		tw.Write([]byte(e.data))
	}
	tw.Close()
	f.Add(tb.Bytes())
	f.Add(tb.Bytes()[:700])
	f.Fuzz(func(t *testing.T, data []byte) { fuzzOpenBytes(t, gzipBytes(data)) })
}

// FuzzOpenManifest fuzzes manifest.json inside an otherwise valid bundle.
func FuzzOpenManifest(f *testing.F) {
	for _, s := range []string{`{"schema_version":1}`, `{"schema_version":1,"job":{"rank":3},"triage":{"verdict":{"kind":"x"}},"exit":{"code":null,"signal":"SIGSEGV"}}`,
		`{"schema_version":2}`, `{"schema_version":"1"}`, `[]`, `{"schema_version":1,"start_time":"bad"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, mj []byte) {
		var tb bytes.Buffer
		tw := tar.NewWriter(&tb)
		tw.WriteHeader(&tar.Header{Name: "kcrash-m/manifest.json", Mode: 0o600, Size: int64(len(mj)), Typeflag: tar.TypeReg})
		tw.Write(mj)
		tw.Close()
		fuzzOpenBytes(t, gzipBytes(tb.Bytes()))
	})
}
