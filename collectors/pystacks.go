package collectors

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/internal/readas"
	"github.com/kcrash/kcrash/internal/scratch"
)

// Python stacks without py-spy: kcrash run puts a sitecustomize.py on the
// child's PYTHONPATH that registers faulthandler's dump on PyStacksSignal,
// writing to a file of kcrash's own. On a hang or a snapshot the stacks
// collector sends that signal to the tree's Python processes that carry the
// marker and caught it, and reads what each wrote.

// PyStacksVar marks a child that kcrash gave the dump handler: its value is
// the directory the dumps go to.
const PyStacksVar = "KCRASH_PYSTACKS_DIR"

// PyStacksSignal is SIGRTMIN+20 (glibc's SIGRTMIN is 34): a real-time
// signal, which no default or library handler uses, away from both ends
// (the low ones serve timers and threads libraries, the high ones tools such
// as valgrind). Its default action is to terminate: it is only ever sent to a
// process whose SigCgt shows it caught.
const PyStacksSignal = syscall.Signal(54)

// pyStacksWait bounds the wait for one process's dump.
const pyStacksWait = time.Second

// sitecustomize is the hook: it registers the dump only where kcrash asked
// (the marker set), only when nothing else handles the signal, then runs the
// sitecustomize it hides, so a user's or the distribution's still runs.
const sitecustomize = `# Written by kcrash: on signal %[1]d, dump every thread's Python stack
# (faulthandler) into a file of kcrash's, for a hang bundle. Then the
# sitecustomize this one hides is run, as if this one were not there.
def _kcrash_pystacks():
    import os, signal, sys
    d = os.environ.get("%[2]s")
    if not d:
        return
    try:
        import faulthandler
        sig = %[1]d
        if signal.getsignal(sig) != signal.SIG_DFL:
            return  # someone's own signal (ignored or handled): leave it alone
        f = open(os.path.join(d, "py-%%d.txt" %% os.getpid()), "a")
        faulthandler.register(sig, file=f, all_threads=True, chain=False)
        # hook-PID exists while the hook's handler is this process's: kcrash
        # signals no other. The program taking the signal for itself removes it.
        mine = [True]
        def ours():
            try:
                open(os.path.join(d, "hook-%%d" %% os.getpid()), "w").close()
            except OSError:
                pass
        def taken(signum):
            if signum == sig and mine[0]:
                mine[0] = False
                try:
                    os.unlink(os.path.join(d, "hook-%%d" %% os.getpid()))
                except OSError:
                    pass
        real_signal = signal.signal
        def _signal(signum, handler):
            taken(signum)
            return real_signal(signum, handler)
        signal.signal = _signal
        real_register, real_unregister = faulthandler.register, faulthandler.unregister
        def _register(signum, *a, **k):
            taken(signum)
            return real_register(signum, *a, **k)
        def _unregister(signum):
            taken(signum)
            return real_unregister(signum)
        faulthandler.register, faulthandler.unregister = _register, _unregister
        os.register_at_fork(after_in_child=lambda: mine[0] and ours())
        ours()
    except Exception:
        pass

def _kcrash_chain():
    import importlib, os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    mod = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        if mod is not None:
            sys.modules["sitecustomize"] = mod
    finally:
        sys.path[:] = saved

_kcrash_pystacks()
_kcrash_chain()
`

// WithoutPyStacks is an environment kcrash set for one run (a manifest's
// env.set) less what the Python-stacks hook put there for that run alone:
// its marker, and its directory at the head of PYTHONPATH (the user's part is
// kept). A later run makes its own hook; the old one's directory is gone.
func WithoutPyStacks(set map[string]string) map[string]string {
	out := make(map[string]string, len(set))
	for k, v := range set {
		switch k {
		case PyStacksVar:
			continue
		case "PYTHONPATH":
			head, rest, _ := strings.Cut(v, string(os.PathListSeparator))
			if filepath.Base(head) == "site" && strings.HasPrefix(filepath.Base(filepath.Dir(head)), PyStacksPrefix) {
				v = rest
			}
			if v == "" {
				continue
			}
		}
		out[k] = v
	}
	return out
}

// PyStacks is what kcrash run made for a child's Python stacks.
type PyStacks struct {
	Dir   string   // removed by Remove
	Env   []string // K=V to set in the child: PYTHONPATH first, then the marker
	stack string
}

// PyStacksPrefix names the hook's directories under $TMPDIR.
const PyStacksPrefix = "kcrash-py-"

// NewPyStacks writes the hook into a new directory under $TMPDIR; pythonPath
// is the user's PYTHONPATH, kept after the hook's directory.
func NewPyStacks(pythonPath string) (*PyStacks, error) {
	dir, err := scratch.Mkdir(PyStacksPrefix)
	if err != nil {
		return nil, err
	}
	// /proc/PID/fd links name the real path: compare like with like.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	site, stacks := filepath.Join(dir, "site"), filepath.Join(dir, "stacks")
	for _, d := range []string{site, stacks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	text := fmt.Sprintf(sitecustomize, int(PyStacksSignal), PyStacksVar)
	if err := os.WriteFile(filepath.Join(site, "sitecustomize.py"), []byte(text), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	pp := site
	if pythonPath != "" {
		pp += string(os.PathListSeparator) + pythonPath
	}
	return &PyStacks{Dir: dir, stack: stacks, Env: []string{"PYTHONPATH=" + pp, PyStacksVar + "=" + stacks}}, nil
}

// StacksDir is the directory the dumps go to (the marker's value).
func (p *PyStacks) StacksDir() string { return p.stack }

// Remove removes the hook and the dumps.
func (p *PyStacks) Remove() { os.RemoveAll(p.Dir) }

// pyDumpTarget is the file a process's dump handler writes to, when the
// process carries the marker for dir and caught PyStacksSignal; "" otherwise.
func pyDumpTarget(env *Env, pid int, dir string) string {
	if dir == "" {
		return ""
	}
	p := strconv.Itoa(pid)
	environ, err := os.ReadFile(env.Proc(p, "environ"))
	if err != nil || !bytes.Contains(append([]byte{0}, environ...), []byte("\x00"+PyStacksVar+"="+dir+"\x00")) {
		return ""
	}
	if !sigCaught(env.Proc(p, "status"), PyStacksSignal) {
		return ""
	}
	// The hook says whether its handler is still the process's: a program
	// that took the signal for itself (its own handler, its own
	// faulthandler.register) would run that instead of dumping.
	if _, err := os.Lstat(filepath.Join(dir, "hook-"+strconv.Itoa(nsPid(env, p)))); err != nil {
		return ""
	}
	// The handler's file: a forked child writes into its parent's.
	fds, _ := os.ReadDir(env.Proc(p, "fd"))
	for _, fd := range fds {
		link, err := os.Readlink(env.Proc(p, "fd", fd.Name()))
		if err == nil && filepath.Dir(link) == dir && strings.HasPrefix(filepath.Base(link), "py-") {
			return link
		}
	}
	return ""
}

// nsPid is the process's pid in its own pid namespace (what os.getpid
// says there, the last of NSpid), or the pid as kcrash sees it.
func nsPid(env *Env, p string) int {
	pid, _ := strconv.Atoi(p)
	b, err := os.ReadFile(env.Proc(p, "status"))
	if err != nil {
		return pid
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "NSpid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
					return n
				}
			}
		}
	}
	return pid
}

// sigCaught reads SigCgt of /proc/PID/status.
func sigCaught(status string, sig syscall.Signal) bool {
	b, err := os.ReadFile(status)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && m&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// pyDump asks one process for its Python stacks and returns what it wrote:
// the signal, then the file's growth until it stops (bounded).
func pyDump(ctx context.Context, pid int, file string) ([]byte, error) {
	before := fileSize(file)
	if err := syscall.Kill(pid, PyStacksSignal); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(pyStacksWait)
	last, still := before, 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		n := fileSize(file)
		switch {
		case n == last && n > before:
			if still++; still >= 2 {
				return readFrom(file, before, n)
			}
		default:
			last, still = n, 0
		}
	}
	if last > before {
		return readFrom(file, before, last)
	}
	return nil, fmt.Errorf("no dump within %s", pyStacksWait)
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// maxPyDump bounds what is read of one process's dump: the file is the
// process's to write (thousands of threads' stacks are a few MB).
const maxPyDump = 16 << 20

func readFrom(p string, from, to int64) ([]byte, error) {
	f, err := readas.Open(p, readas.Opts{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, min(max(to-from, 0), maxPyDump))
	n, err := f.ReadAt(b, from)
	if n > 0 {
		err = nil
	}
	return b[:n], err
}
