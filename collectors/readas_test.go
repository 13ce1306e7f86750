package collectors

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/testenv"
)

// nobody is the unprivileged user the tests read as (Debian's nobody:nogroup).
var nobody = &Identity{UID: 65534, GID: 65534, Groups: []int{65534}, Name: "nobody"}

func refusedWith(t *testing.T, err error, why string) {
	t.Helper()
	var r *RefusedError
	if !errors.As(err, &r) || !strings.Contains(r.Why, why) {
		t.Fatalf("error %v, want a refusal saying %q", err, why)
	}
}

// TestOpenAsJobUser reads, as root, with an unprivileged user's rights: what
// that user may read comes back; a root-only file, one in a directory the
// user cannot search, a symlink, a FIFO and a device are refused without
// blocking, and no other thread of kcrash loses root's rights meanwhile.
func TestOpenAsJobUser(t *testing.T) {
	testenv.NeedRoot(t, "switching the filesystem identity to another user")
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent is 0700
	os.Chmod(dir, 0o755)
	write := func(name, data string, mode os.FileMode, uid int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, uid, uid)
		return p
	}
	own := write("own.log", "the job's own line\n", 0o600, nobody.UID)
	secret := write("secret", "ROOT-ONLY SECRET\n", 0o600, 0)
	private := filepath.Join(dir, "private")
	os.Mkdir(private, 0o700)
	hidden := filepath.Join(private, "open.log")
	os.WriteFile(hidden, []byte("world-readable, in a root-only directory\n"), 0o644)
	link := filepath.Join(dir, "link.log")
	os.Symlink(secret, link)
	linkOwn := filepath.Join(dir, "link-own.log")
	os.Symlink(own, linkOwn)
	fifo := filepath.Join(dir, "fifo.log")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chown(fifo, nobody.UID, nobody.GID)
	parentLink := filepath.Join(dir, "via")
	os.Symlink(dir, parentLink)

	b, size, err := TailFileAs(nobody, own, 1<<20)
	if err != nil || string(b) != "the job's own line\n" || size != int64(len(b)) {
		t.Fatalf("own file: %q %d %v", b, size, err)
	}
	// A symlinked directory on the way is the user's business (their home may
	// be one); the file at its end is still checked with their rights.
	if b, _, err := TailFileAs(nobody, filepath.Join(parentLink, "own.log"), 1<<20); err != nil || len(b) == 0 {
		t.Fatalf("through a symlinked directory: %q %v", b, err)
	}
	_, _, err = TailFileAs(nobody, secret, 1<<20)
	refusedWith(t, err, "may not read it")
	_, _, err = TailFileAs(nobody, hidden, 1<<20)
	refusedWith(t, err, "may not read it")
	_, _, err = TailFileAs(nobody, link, 1<<20)
	refusedWith(t, err, "symlink")
	_, _, err = TailFileAs(nobody, linkOwn, 1<<20)
	refusedWith(t, err, "symlink")
	begin := time.Now()
	_, _, err = TailFileAs(nobody, fifo, 1<<20)
	refusedWith(t, err, "FIFO")
	_, _, err = TailFileAs(nobody, "/dev/null", 1<<20)
	refusedWith(t, err, "device")
	_, _, err = TailFileAs(nobody, dir, 1<<20)
	refusedWith(t, err, "directory")
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("refusing a FIFO, a device and a directory took %s", d)
	}
	if _, _, err := TailFileAs(nobody, filepath.Join(dir, "missing"), 1<<20); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}

	// The switch is per thread: while job-user reads run, every other
	// goroutine keeps root's rights (a root-only file stays readable).
	var wg sync.WaitGroup
	fail := make(chan string, 100)
	for i := 0; i < 20; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, _, err := TailFileAs(nobody, secret, 100); err == nil {
				fail <- "job-user read of the secret succeeded"
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := os.ReadFile(secret); err != nil {
				fail <- "root lost its rights: " + err.Error()
			}
		}()
	}
	wg.Wait()
	close(fail)
	for f := range fail {
		t.Error(f)
	}
}

// TestOpenAsOwnRights: without an identity, the same shape rules hold.
func TestOpenAsOwnRights(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.log")
	os.WriteFile(f, []byte("0123456789"), 0o644)
	if b, size, err := TailFileAs(nil, f, 4); err != nil || string(b) != "6789" || size != 10 {
		t.Fatalf("tail: %q %d %v", b, size, err)
	}
	l := filepath.Join(dir, "l.log")
	os.Symlink(f, l)
	_, _, err := TailFileAs(nil, l, 4)
	refusedWith(t, err, "symlink")
	p := filepath.Join(dir, "p")
	syscall.Mkfifo(p, 0o600)
	_, _, err = TailFileAs(nil, p, 4)
	refusedWith(t, err, "FIFO")
}

func TestLookupIdentity(t *testing.T) {
	id := LookupIdentity(0, -1)
	if id.Name != "root" || id.GID != 0 || len(id.Groups) == 0 || id.Groups[0] != 0 {
		t.Errorf("root: %+v", id)
	}
	id = LookupIdentity(424242, -1)
	if id.GID != 424242 || len(id.Groups) != 1 {
		t.Errorf("unknown uid: %+v", id)
	}
}
