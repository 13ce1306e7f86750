package bundle

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
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

func stageWith(t *testing.T, files map[string][]byte) *Stage {
	t.Helper()
	st, err := NewStage(t.TempDir(), Name(time.Now(), "node/7", 42, "3"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		p := filepath.Join(st.Dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestNameSanitisedWithRank(t *testing.T) {
	n := Name(time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC), "node/7 x", 4242, "3")
	if n != "kcrash-20261202T101500Z-node_7_x-4242-r3" {
		t.Fatalf("Name = %q", n)
	}
}

// Secrets are masked across the chunk boundaries of the streaming redaction,
// and the tail of an over-budget file is kept.
func TestWriteRedactsLargeFilesInChunks(t *testing.T) {
	secret := "hf_" + strings.Repeat("A1b2C3d4", 5)
	var log bytes.Buffer
	for log.Len() < 3*redactChunk {
		noise := make([]byte, 700)
		rand.Read(noise)
		log.WriteString(hex.EncodeToString(noise) + " token=" + secret + "\n")
	}
	log.WriteString("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nlast line\n")
	st := stageWith(t, map[string][]byte{"output.log": log.Bytes(), "raw/x.txt": []byte("pw=" + "s3cr3t-value-xyz\n")})
	out := t.TempDir()
	m := &Manifest{SchemaVersion: SchemaVersion, Command: []string{"sh", "-c", "echo " + secret}}
	res, err := st.Write(m, WriteOptions{Out: out, Budget: redactChunk, Redactor: redact.New([]string{"MY_PASSWORD=s3cr3t-value-xyz"})})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range b.Names() {
		data, _ := b.File(name)
		if bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte("s3cr3t-value-xyz")) || bytes.Contains(data, []byte("MIIEow")) {
			t.Errorf("%s still holds a secret", name)
		}
	}
	o, _ := b.File("output.log")
	if int64(len(o)) > 2*redactChunk || !bytes.HasSuffix(o, []byte("[REDACTED]\nlast line\n")) {
		t.Fatalf("output.log: %d bytes, tail %q", len(o), o[max(0, len(o)-60):])
	}
	if len(b.Manifest.Truncated) != 1 || b.Manifest.Truncated[0] != "output.log" {
		t.Fatalf("truncated = %v", b.Manifest.Truncated)
	}
	if !strings.HasPrefix(filepath.Base(res.Path), "kcrash-") || !strings.HasSuffix(res.Path, "-r3.tar.gz") {
		t.Fatalf("path %s", res.Path)
	}
}

// Two bundles of the same name never overwrite each other.
func TestWriteNeverOverwrites(t *testing.T) {
	out := t.TempDir()
	var paths []string
	for i := 0; i < 3; i++ {
		st := stageWith(t, map[string][]byte{"output.log": []byte("x")})
		st.Name = "kcrash-same"
		res, err := st.Write(&Manifest{}, WriteOptions{Out: out})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Base(res.Path))
	}
	if strings.Join(paths, " ") != "kcrash-same.tar.gz kcrash-same-2.tar.gz kcrash-same-3.tar.gz" {
		t.Fatalf("paths %v", paths)
	}
}

// A full disk under --out sends the bundle to the fallback directory.
func TestWriteFallsBackWhenDiskFull(t *testing.T) {
	testenv.NeedRoot(t, "mounting a small tmpfs")
	full := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", full).CombinedOutput(); err != nil {
		testenv.Skip(t, "cannot mount tmpfs: %v %s", err, out)
	}
	defer syscall.Unmount(full, syscall.MNT_DETACH)
	noise := make([]byte, 1<<20)
	rand.Read(noise)
	st := stageWith(t, map[string][]byte{"output.log": noise})
	fb := t.TempDir()
	res, err := st.Write(&Manifest{}, WriteOptions{Out: full, Fallback: fb})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback == nil || !strings.Contains(res.Fallback.Error(), "no space left") || filepath.Dir(res.Path) != fb {
		t.Fatalf("fallback %v, path %s", res.Fallback, res.Path)
	}
	if ents, _ := os.ReadDir(full); len(ents) != 0 {
		t.Fatalf("left %d files on the full disk", len(ents))
	}
}
