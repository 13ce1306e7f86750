package readas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// TestBoundedReads: ReadFile refuses a 60 GB (sparse) file before reading
// it and takes a /proc file (size 0) whole; ReadHead reads only its head.
func TestBoundedReads(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("head\n")
	f.Truncate(60 << 30)
	f.Close()
	if _, err := ReadFile(big, 1<<20, Opts{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("60 GB file: %v", err)
	}
	if b, err := ReadHead(big, 5, Opts{}); err != nil || string(b) != "head\n" {
		t.Errorf("head %q %v", b, err)
	}
	if b, err := ReadFile("/proc/self/status", 1<<20, Opts{}); err != nil || !strings.Contains(string(b), "Pid:") {
		t.Errorf("/proc/self/status: %v", err)
	}
	if _, err := ReadFile("/proc/self/status", 10, Opts{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a /proc file over the bound: %v", err)
	}
}

// TestNeverBlocks: a FIFO in a file's or a directory's place is refused at
// once, followed through a link or not.
func TestNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(fifo, filepath.Join(dir, "link"))
	done := make(chan string, 1)
	go func() {
		var errs []string
		for _, p := range []string{fifo, filepath.Join(dir, "link")} {
			_, err := ReadFile(p, 100, Opts{Follow: true})
			errs = append(errs, fmt.Sprint(err))
			_, err = ReadDir(p, 100)
			errs = append(errs, fmt.Sprint(err))
		}
		done <- strings.Join(errs, "; ")
	}()
	select {
	case errs := <-done:
		if strings.Count(errs, "FIFO") != 2 || strings.Count(errs, "not a directory") != 2 {
			t.Errorf("errors: %s", errs)
		}
	case <-time.After(5 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("blocked on a FIFO")
	}
}

// TestReadDirBound: past max entries, the first max and ErrTooLarge.
func TestReadDirBound(t *testing.T) {
	dir := t.TempDir()
	for i := range 30 {
		os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644)
	}
	if ents, err := ReadDir(dir, 30); err != nil || len(ents) != 30 {
		t.Errorf("30 of 30: %d %v", len(ents), err)
	}
	if ents, err := ReadDir(dir, 10); !errors.Is(err, ErrTooLarge) || len(ents) != 10 {
		t.Errorf("10 of 30: %d %v", len(ents), err)
	}
}

// TestDoFollowsWithTheUsersRights: under Do as an unprivileged user, a
// followed link reaches the user's own file and not a root-only one, and
// the caller keeps root's rights.
func TestDoFollowsWithTheUsersRights(t *testing.T) {
	testenv.NeedRoot(t, "reading as another user")
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	secret, own := filepath.Join(dir, "secret"), filepath.Join(dir, "own")
	os.WriteFile(secret, []byte("root only\n"), 0o600)
	os.WriteFile(own, []byte("anyone\n"), 0o644)
	os.Symlink(secret, filepath.Join(dir, "to-secret"))
	os.Symlink(own, filepath.Join(dir, "to-own"))
	nobody := Nobody()
	var ownErr, secretErr error
	var got []byte
	err := Do(nobody, func() error {
		got, ownErr = ReadFile(filepath.Join(dir, "to-own"), 100, Opts{Follow: true})
		_, secretErr = ReadFile(filepath.Join(dir, "to-secret"), 100, Opts{Follow: true})
		return nil
	})
	if err != nil || ownErr != nil || string(got) != "anyone\n" {
		t.Errorf("own file through a link: %q %v %v", got, ownErr, err)
	}
	if !errors.Is(secretErr, os.ErrPermission) {
		t.Errorf("root-only file through a link: %v", secretErr)
	}
	if _, err := ReadFile(filepath.Join(dir, "to-secret"), 100, Opts{Follow: true}); err != nil {
		t.Errorf("the caller lost root's rights: %v", err)
	}
	// OpenAs's refusal names the user and the bare reason
	var r *RefusedError
	if _, err := OpenAs(nobody, secret); !errors.As(err, &r) || r.Why != "the job's user "+nobody.String()+" may not read it (permission denied)" {
		t.Errorf("refusal: %v", err)
	}
	// without Follow, a link is refused whoever reads
	if _, err := ReadFile(filepath.Join(dir, "to-own"), 100, Opts{}); !errors.As(err, &r) {
		t.Errorf("a link not followed: %v", err)
	}
}
