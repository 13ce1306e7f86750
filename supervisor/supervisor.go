// Package supervisor runs one command the way a user would, under a pty or
// pipes, and stays out of its way: output passes through byte for byte while
// a ring buffer keeps its tail, signals are forwarded to the child's process
// group, and the child's exit status comes back exactly. It knows nothing of
// bundles; the caller decides what to do with the result.
package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Options describe the command and how to run it.
type Options struct {
	Args []string
	Env  []string // the child's full environment
	Dir  string

	NoPty  bool     // pipes instead of a pty; stdout and stderr kept apart
	Stdin  *os.File // kcrash's stdin; a terminal makes the run interactive
	Stdout io.Writer
	Stderr io.Writer // the child's stderr, apart from stdout unless both are one terminal

	Ring io.Writer // gets every output byte, stdout and stderr interleaved
	Log  io.Writer // optional: the full output

	KillAfter time.Duration // grace between a forwarded SIGTERM/SIGINT and SIGKILL; 0 = none
	// OnSignal, when set, is asked first about each signal kcrash receives; it
	// returns true when it consumed the signal (a snapshot request).
	OnSignal func(os.Signal) bool
	// Caught are more signals for OnSignal alone (--snapshot-signal): caught
	// even if ignored at start (the user asked kcrash for them), and never
	// forwarded. The child still starts with them as kcrash did.
	Caught []syscall.Signal
}

// StartError is kcrash's own failure to start the command; Code follows
// env(1): 126 found but not executable, 127 not found, 125 anything else.
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }

// Result is how the child ended.
type Result struct {
	Pid        int
	Code       int // exit code, or -1 when killed by a signal
	Signal     syscall.Signal
	CoreDumped bool
	Start, End time.Time
	// Bytes of output that a slow or closed stdout did not take (still in
	// the ring and the log).
	StdoutDropped int64
	StdoutClosed  bool
	// ReaderGone: the reader of kcrash's stdout or stderr went away (EPIPE)
	// and the child was told so (its pipe closed, its pty hung up), as it
	// would have found out by itself without kcrash.
	ReaderGone bool
	LogErr     error
	// Stop is the first SIGINT, SIGTERM, SIGHUP or SIGQUIT kcrash received
	// and forwarded (0: none); Escalated, that kcrash then sent SIGKILL.
	Stop      syscall.Signal
	Escalated bool
	// Keyboard: the user's keys went to the child's pty (interactive), so a
	// SIGINT the child died of came from a typed ^C.
	Keyboard bool
}

// ExitStatus is the status kcrash itself should exit with: the child's
// code, or 128+N for signal N.
func (r *Result) ExitStatus() int {
	if r.Signal != 0 {
		return 128 + int(r.Signal)
	}
	return r.Code
}

// Child is a running supervised command.
type Child struct {
	opts    Options
	cmd     *exec.Cmd
	pid     int
	start   time.Time
	ptmx    *os.File // the pty the child's stdin (and stdout) is on; nil with --no-pty
	streams []*stream
	output  atomic.Int64 // unix nanos of the last output byte
	fan     *fanout
	fanMu   sync.Mutex // ring and log see whole chunks of the two streams in arrival order

	refFd       int      // the user's terminal the pty follows (size), -1 if none
	errPty      *os.File // stderr's own pty in batch mode when stderr is a terminal
	veof        byte     // the child's pty's end-of-file character
	restoreTerm func()
	// The user's terminal on kcrash's stdin (-1: none), and, with keys (an
	// interactive run), whether kcrash has it raw and its settings before
	// (see jobctl_linux.go).
	inFd    int
	ttyFd   int // a terminal among kcrash's stdin, stdout and stderr, -1 if none
	keys    bool
	termMu  sync.Mutex
	raw     bool
	cooked  *term.State
	resumed chan struct{} // SIGCONT: kcrash may be in the foreground again
	// started is closed once the child's start is over, failed or not:
	// a signal that arrives while the child already runs but its start
	// has not returned yet waits for it instead of being dropped.
	started   chan struct{}
	stopWith  atomic.Int32 // the signal the job was asked to stop with (suspend)
	sigCh     chan os.Signal
	stopSig   chan struct{}
	killTimer *time.Timer
	mu        sync.Mutex
	stop      syscall.Signal
	escalated bool
	keyboard  bool
	exited    chan struct{}
}

// Forwarded are the signals passed on to the child's process group: every
// signal someone may send a job to stop it, wake it, make it dump (kill -ABRT
// for a core, SIGQUIT for Python's faulthandler), warn it (SIGXCPU, a batch
// system's soft CPU limit) or tell it something, as tini and dumb-init pass
// them on. SIGINT, SIGTERM, SIGHUP and SIGQUIT also stop the run
// (Result.Stop). SIGTSTP, SIGTTIN and SIGTTOU suspend the job and SIGCONT
// resumes it (see jobctl_linux.go); the kernel's own SIGTTIN or SIGTTOU for
// kcrash touching the terminal from the background (a write with tostop
// set) suspends the job too, as it would stop the bare command. SIGWINCH is forwarded where no terminal of kcrash's sets
// the child's window size (--no-pty, or batch without a terminal): a pty
// sends its own.
//
// Left out are the signals kcrash cannot tell from its own doing: SIGPIPE
// (kcrash's write to a reader that went away, or to the health check's or an
// upload's socket, raises it: a reader that went away is passed on by the
// pump), SIGXFSZ (kcrash's own --log over the file size limit, where the
// child may write no file), SIGURG (the runtime's preemption), SIGPROF (the
// runtime never delivers it) and SIGCHLD. SIGKILL and SIGSTOP cannot be
// caught.
var Forwarded = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
	syscall.SIGUSR2, syscall.SIGABRT, syscall.SIGALRM, syscall.SIGVTALRM, syscall.SIGPWR, syscall.SIGSYS,
	syscall.SIGTRAP, syscall.SIGILL, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSTKFLT,
	syscall.SIGIO, syscall.SIGXCPU, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT}

// Start starts the command. Errors are *StartError.
func Start(o Options) (*Child, error) {
	if len(o.Args) == 0 {
		return nil, &StartError{Code: 125, Err: errors.New("no command given")}
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	path, err := lookPath(o.Args[0], o.Env)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: o.Args, Env: o.Env, Dir: o.Dir}
	c := &Child{opts: o, cmd: cmd, exited: make(chan struct{}), stopSig: make(chan struct{}),
		refFd: -1, inFd: -1, ttyFd: -1, resumed: make(chan struct{}, 1), started: make(chan struct{})}
	c.output.Store(time.Now().UnixNano())
	c.fan = &fanout{logW: o.Log}
	if o.Ring != nil {
		c.fan.sinks = append(c.fan.sinks, o.Ring)
	}
	// Write errors on a closed stdout must come back as EPIPE, not kill
	// kcrash; Notify (unlike Ignore) leaves the child's SIGPIPE at default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	for _, f := range []any{o.Stdin, o.Stdout, o.Stderr} {
		if fd := terminalFd(f); fd >= 0 && c.ttyFd < 0 {
			c.ttyFd = fd
		}
	}
	c.installSignals()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if o.NoPty {
		err = c.startPipes()
	} else {
		err = c.startPty()
	}
	if err != nil {
		close(c.started)
		signal.Stop(chld)
		c.stopSignals()
		if c.restoreTerm != nil {
			c.restoreTerm()
		}
		return nil, startError(o.Args[0], err)
	}
	c.pid = cmd.Process.Pid
	c.start = time.Now()
	close(c.started)
	for _, st := range c.streams {
		go st.run()
	}
	go c.watchStalls()
	go c.watchStops(chld)
	return c, nil
}

// addStream pumps src to w.
func (c *Child) addStream(src *os.File, w io.Writer) {
	c.streams = append(c.streams, newStream(c, src, w))
}

// watchStalls is the streams' watchdog (see stream): it looks twice per
// stallAfter, never per chunk.
func (c *Child) watchStalls() {
	t := time.NewTicker(stallAfter / 4)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			for _, st := range c.streams {
				st.checkStall(now)
			}
		case <-c.stopSig:
			return
		}
	}
}

// SameFile reports whether kcrash's stdout and stderr are one open file
// (`> run.log 2>&1`, sbatch's default, one pipe): the child then gets one
// stream for both, so that its lines keep the order it wrote them in.
func SameFile(a, b io.Writer) bool {
	if a == b {
		return true
	}
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 || fa == nil || fb == nil {
		return false
	}
	var sa, sb unix.Stat_t
	if unix.Fstat(int(fa.Fd()), &sa) != nil || unix.Fstat(int(fb.Fd()), &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// copySize gives the pty master m the window size of the terminal ref.
func copySize(ref int, m *os.File) error {
	ws, err := unix.IoctlGetWinsize(ref, unix.TIOCGWINSZ)
	if err != nil {
		return err
	}
	return setSize(m, ws)
}

// setSize sets a pty's window size without Fd(), which would put a
// pollable master back into blocking mode.
func setSize(m *os.File, ws *unix.Winsize) error {
	rc, err := m.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) }); cerr != nil {
		return cerr
	}
	return err
}

// pollable returns f's descriptor as a non-blocking file the runtime's
// poller waits on (a pty master is opened blocking): reads park the
// goroutine instead of a thread, and a read deadline can end them.
func pollable(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	rc.Control(func(fd uintptr) { nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	if err != nil {
		return nil, err
	}
	f.Close()
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, err
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// terminalFd is w's descriptor when w is a terminal, else -1.
func terminalFd(w any) int {
	if f, ok := w.(*os.File); ok && f != nil && term.IsTerminal(int(f.Fd())) {
		return int(f.Fd())
	}
	return -1
}

// Pid is the child's pid (and process group id).
func (c *Child) Pid() int { return c.pid }

// StartTime is when the child started.
func (c *Child) StartTime() time.Time { return c.start }

// LastOutput is when the child last wrote anything.
func (c *Child) LastOutput() time.Time { return time.Unix(0, c.output.Load()) }

// Exited is closed once the child has been reaped.
func (c *Child) Exited() <-chan struct{} { return c.exited }

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		fi, err := os.Stat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", &StartError{127, fmt.Errorf("cannot run %q: no such file or directory", name)}
		case err != nil:
			return "", &StartError{126, fmt.Errorf("cannot run %q: %v", name, unwrapPath(err))}
		case fi.IsDir():
			return "", &StartError{126, fmt.Errorf("cannot run %q: is a directory", name)}
		case fi.Mode()&0o111 == 0:
			return "", &StartError{126, fmt.Errorf("cannot run %q: permission denied", name)}
		}
		return name, nil
	}
	// Look the name up in the child's PATH, as a shell would.
	pathVar := os.Getenv("PATH")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	sawNonExec := false
	for _, dir := range strings.Split(pathVar, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 == 0 {
			sawNonExec = true
			continue
		}
		return p, nil
	}
	if sawNonExec {
		return "", &StartError{126, fmt.Errorf("cannot run %q: permission denied", name)}
	}
	return "", &StartError{127, fmt.Errorf("cannot run %q: executable file not found in $PATH", name)}
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func startError(name string, err error) error {
	var se *StartError
	if errors.As(err, &se) {
		return se
	}
	code := 125
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR) {
		code = 126
	} else if errors.Is(err, syscall.ENOENT) {
		code = 127 // a script whose interpreter is missing
	}
	return &StartError{code, fmt.Errorf("cannot run %q: %v", name, unwrapPath(err))}
}

// batchSize is the window size when kcrash has no terminal: wide enough that
// tools which format for the terminal do not wrap their tables.
var batchSize = &unix.Winsize{Row: 50, Col: 250}

// startPty gives the child a pty, the way its streams were given to kcrash:
//
//   - stdout and stderr one terminal (a user at a shell): one pty for all
//     three, with the user's termios and window size. With a terminal on
//     stdin too, the terminal goes raw and keys pass through (interactive);
//     else stdin is fed through until its end, unechoed.
//   - otherwise (batch: CI, nohup, srun, `> out.log 2> err.log`): stdout on
//     a pty (line-buffered, the last lines before an abort are not lost),
//     stderr apart from it, each to where the user sent it: a second pty
//     when kcrash's stderr is a terminal, else a pipe, as the child would
//     have without kcrash (no colours or progress bars written into a file;
//     stderr is unbuffered in C and line-buffered in Python on a pipe too).
//     When stdout and stderr are one file (`> run.log 2>&1`, sbatch's
//     default), one pty for both keeps the order the child wrote them in.
//     No output processing (no \r\n), no echo of stdin fed through.
func (c *Child) startPty() error {
	inFd := int(c.opts.Stdin.Fd())
	inTTY := term.IsTerminal(inFd)
	outFd, errFd := terminalFd(c.opts.Stdout), terminalFd(c.opts.Stderr)
	interactive := outFd >= 0 && errFd >= 0
	together := interactive || SameFile(c.opts.Stdout, c.opts.Stderr)
	keys := interactive && inTTY
	// The terminal whose settings the child's ptys start with.
	ref := outFd
	if inTTY {
		ref = inFd
	} else if ref < 0 {
		ref = errFd
	}
	c.refFd = ref
	ptmx, tty, err := pty.Open()
	if err == nil {
		if ptmx, err = pollable(ptmx); err != nil {
			tty.Close()
		}
	}
	if err != nil {
		return err
	}
	defer tty.Close()
	tios, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		ptmx.Close()
		return err
	}
	if ref >= 0 {
		if t, err := unix.IoctlGetTermios(ref, unix.TCGETS); err == nil {
			tios = t
		}
	}
	if !interactive {
		tios.Oflag &^= unix.OPOST
	}
	if !keys {
		tios.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL | unix.ECHOCTL
	}
	setup := func(m, s *os.File) {
		unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tios)
		if ref < 0 || copySize(ref, m) != nil {
			setSize(m, batchSize)
		}
	}
	setup(ptmx, tty)
	c.ptmx = ptmx
	c.veof = tios.Cc[unix.VEOF]
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = tty, tty, tty
	var errR *os.File
	if !together {
		var errW *os.File
		if errFd >= 0 {
			errR, errW, err = pty.Open()
			if err == nil {
				if errR, err = pollable(errR); err != nil {
					errW.Close()
				}
			}
			if err == nil {
				setup(errR, errW)
				c.errPty = errR
			}
		} else if errR, errW, err = os.Pipe(); err == nil {
			widen(errW)
		}
		if err != nil {
			ptmx.Close()
			return err
		}
		defer errW.Close()
		c.cmd.Stderr = errW
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	var pending []byte
	if inTTY {
		c.inFd = inFd
	}
	if keys {
		// Raw before the child starts, so that nothing the user types is
		// taken by kcrash's terminal as a signal or an edit; what was typed
		// before is passed on as typed. From the background, only once the
		// shell brings the job to the foreground (resume).
		c.keys, c.keyboard = true, true
		pending = c.goRaw()
		c.restoreTerm = c.goCooked
	}
	if err := startJob(c.cmd); err != nil {
		ptmx.Close()
		if errR != nil {
			errR.Close()
		}
		return err
	}
	if ref >= 0 {
		c.watchWinch()
	}
	c.addStream(ptmx, c.opts.Stdout)
	if errR != nil {
		c.addStream(errR, c.opts.Stderr)
	}
	go c.feedStdin(ptmx, pending, !keys)
	return nil
}

// pendingInput reads what a terminal in canonical mode already holds: whole
// lines, and each end of file typed (a read of 0) as veof.
func pendingInput(fd int, veof byte) []byte {
	var out []byte
	buf := make([]byte, 4096)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err != nil || n == 0 || fds[0].Revents&unix.POLLIN == 0 {
			return out
		}
		n, err := unix.Read(fd, buf)
		switch {
		case n > 0:
			out = append(out, buf[:n]...)
		case n == 0 && err == nil:
			out = append(out, veof)
		default:
			return out
		}
	}
}

func (c *Child) startPipes() error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	widen(outW)
	widen(errW)
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = c.opts.Stdin, outW, errW
	if SameFile(c.opts.Stdout, c.opts.Stderr) {
		c.cmd.Stderr = outW // one pipe keeps the order of the two streams
	}
	// The child leads its own group (forwarded signals reach all of it) and
	// dies with kcrash.
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.cmd.SysProcAttr = attr
	if fd := int(c.opts.Stdin.Fd()); term.IsTerminal(fd) {
		// The child must own the terminal to read from it in its own group:
		// it gets the foreground that kcrash holds, and none when kcrash
		// runs in the background (`&`), where it stops only once it reads
		// the terminal, as the bare command would.
		c.inFd = fd
		if foreground(fd) {
			// ^C typed then reaches the child alone, as a SIGINT kcrash
			// never sees: the user's keys, as through the pty.
			attr.Foreground, attr.Ctty = true, fd
			c.keyboard = true
		}
		c.restoreTerm = c.takeTerminal
	}
	err = startJob(c.cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	c.addStream(outR, c.opts.Stdout)
	if c.cmd.Stderr == errW {
		c.addStream(errR, c.opts.Stderr)
	} else {
		errR.Close()
	}
	return nil
}

// pipeSize is the capacity kcrash gives the pipes the child writes into: a
// child writing fast (cat, a logging storm) then blocks, and wakes kcrash,
// a quarter as often as with the default 64 KiB, which is what lets kcrash
// pass output on faster than tee. It stays well inside a user's budget of
// enlarged pipes (fs.pipe-user-pages-soft, 64 MiB by default), past which
// the kernel would shrink every new pipe of that user; a refusal keeps the
// default.
const pipeSize = 256 << 10

func widen(w *os.File) { unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, pipeSize) }

// feedStdin copies kcrash's stdin to the pty, after what was pending on the
// terminal. In batch mode, EOF on stdin becomes an EOF for the child (VEOF
// at a line start), as script(1) does.
// Nobody waits for this goroutine: a read on a terminal cannot be interrupted.
func (c *Child) feedStdin(ptmx *os.File, pending []byte, batch bool) {
	if len(pending) > 0 {
		if _, err := ptmx.Write(pending); err != nil {
			return
		}
	}
	buf := make([]byte, 32<<10)
	var last byte = '\n'
	for {
		n, err := c.readStdin(buf)
		if n > 0 {
			if !c.passInput(ptmx, buf[:n]) {
				return
			}
			last = buf[n-1]
		}
		if err != nil {
			break
		}
	}
	select {
	case <-c.exited:
	default:
		// VEOF ends a read only at the start of a line; a pending partial
		// line takes one VEOF to flush it and another to signal end of file.
		// (A raw terminal reads no end of file: there this is a hangup.)
		eof := []byte{c.veof}
		if batch && last != '\n' {
			eof = []byte{c.veof, c.veof}
		}
		ptmx.Write(eof)
	}
}

// readStdin reads kcrash's stdin. A terminal is read only while kcrash is
// in its foreground (and, interactive, has it raw): a read from the
// background would stop kcrash with SIGTTIN, where the bare command, which
// may never read, runs on. It returns io.EOF when the child has ended.
func (c *Child) readStdin(buf []byte) (int, error) {
	if c.inFd < 0 {
		return c.opts.Stdin.Read(buf)
	}
	for {
		if !c.awaitForeground() {
			return 0, io.EOF
		}
		if p := c.goRaw(); len(p) > 0 { // brought to the foreground without a SIGCONT: fg of a running job
			if _, err := c.ptmx.Write(p); err != nil {
				return 0, err
			}
		}
		fds := []unix.PollFd{{Fd: int32(c.inFd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err == unix.EINTR {
			continue
		} else if err != nil {
			return 0, err
		}
		n, err, ready := c.readTerminal(buf)
		if ready {
			if n == 0 && err == nil {
				err = io.EOF // an end of file typed
			}
			return n, err
		}
		select { // in the foreground, not raw yet: resume is at it
		case <-c.resumed:
		case <-c.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readTerminal reads what the terminal holds, under termMu so that it never
// races goRaw's reading of the pending input, and without blocking.
func (c *Child) readTerminal(buf []byte) (n int, err error, ready bool) {
	c.termMu.Lock()
	defer c.termMu.Unlock()
	if !foreground(c.inFd) || c.keys && !c.raw {
		return 0, nil, false
	}
	fds := []unix.PollFd{{Fd: int32(c.inFd), Events: unix.POLLIN}}
	if k, _ := unix.Poll(fds, 0); k == 0 {
		return 0, nil, false
	}
	n, err = unix.Read(c.inFd, buf)
	return max(n, 0), err, true
}

// passInput writes what the user typed to the child's pty. A suspend
// character (^Z) the child's pty would turn into a SIGTSTP that the kernel
// then drops (see suspendKey) suspends the job instead, as it would suspend
// the bare command; it is still written, for the pty's echo and for a
// program that handles SIGTSTP.
func (c *Child) passInput(ptmx *os.File, b []byte) bool {
	for len(b) > 0 {
		chunk, i := b, -1
		if c.keys {
			i = c.suspendKey(ptmx, b)
		}
		if i >= 0 {
			chunk = b[:i+1]
		}
		if _, err := ptmx.Write(chunk); err != nil {
			return false
		}
		b = b[len(chunk):]
		if i >= 0 {
			c.suspend(syscall.SIGTSTP)
		}
	}
	return true
}

// suspendKey is the index in b of the first suspend character that the
// child's pty takes as a signal (ISIG, VSUSP set) while the pty's foreground
// is the child's own group: that group leads the pty's session and is
// orphaned, so the kernel drops the SIGTSTP. -1 when none, or when the
// foreground is a job of a shell running in the child, whose own job control
// handles it.
func (c *Child) suspendKey(ptmx *os.File, b []byte) int {
	rc, err := ptmx.SyscallConn()
	if err != nil {
		return -1
	}
	var tios *unix.Termios
	pgrp := -1
	rc.Control(func(fd uintptr) {
		tios, _ = unix.IoctlGetTermios(int(fd), unix.TCGETS)
		pgrp, _ = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP)
	})
	if tios == nil || tios.Lflag&unix.ISIG == 0 || tios.Cc[unix.VSUSP] == 0 || pgrp != c.pid {
		return -1
	}
	return bytes.IndexByte(b, tios.Cc[unix.VSUSP])
}

func (c *Child) watchWinch() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ch:
				copySize(c.refFd, c.ptmx)
				if c.errPty != nil {
					copySize(c.refFd, c.errPty)
				}
			case <-c.exited:
				return
			}
		}
	}()
}

// forwards reports whether s is passed on to the child. Before the start,
// SIGWINCH counts as forwarded: whether a terminal sets the window is known
// only once the pty is made.
func (c *Child) forwards(s syscall.Signal) bool {
	return slices.Contains(Forwarded, s) || s == syscall.SIGWINCH && (c.opts.NoPty || c.refFd < 0)
}

func (c *Child) installSignals() {
	var sigs []os.Signal
	for _, s := range append(slices.Clip(Forwarded), syscall.SIGWINCH) {
		// A signal ignored when kcrash started (nohup, background jobs) stays
		// so for kcrash and the child, and is not forwarded. One blocked at
		// start is caught (the runtime may have unblocked it) and dropped
		// (handleSignal): it stays blocked for the child.
		if c.forwards(s) && !IgnoredAtStart(s) {
			sigs = append(sigs, s)
		}
	}
	for _, s := range c.opts.Caught {
		sigs = append(sigs, s)
	}
	c.sigCh = make(chan os.Signal, 8)
	signal.Notify(c.sigCh, sigs...)
	go func() {
		for {
			select {
			case s := <-c.sigCh:
				c.handleSignal(s)
			case <-c.stopSig:
				return
			}
		}
	}()
}

func (c *Child) stopSignals() {
	signal.Stop(c.sigCh)
	select {
	case <-c.stopSig:
	default:
		close(c.stopSig)
	}
}

func (c *Child) handleSignal(s os.Signal) {
	if c.opts.OnSignal != nil && c.opts.OnSignal(s) {
		return
	}
	sig := s.(syscall.Signal)
	// The child can run (and a test or a user can signal kcrash because
	// of what it printed) before its start has returned here.
	<-c.started
	if c.pid == 0 || BlockedAtStart(sig) || !c.forwards(sig) {
		return
	}
	switch sig {
	case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		c.suspend(sig)
		return
	case syscall.SIGCONT:
		c.resume()
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		c.mu.Lock()
		if c.stop == 0 {
			c.stop = sig
		}
		c.mu.Unlock()
	}
	c.signalGroup(sig)
	if sig == syscall.SIGINT || sig == syscall.SIGTERM {
		// A second one is forwarded like the first, as tini and dumb-init
		// do: timeout(1) and Slurm signal the child and then its group, so
		// kcrash often gets two at once, and a SIGKILL then would cut the
		// child's own shutdown short. Only --kill-after escalates.
		c.armKill()
	}
}

func (c *Child) armKill() {
	if c.opts.KillAfter <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killTimer == nil {
		c.killTimer = time.AfterFunc(c.opts.KillAfter, c.Kill)
	}
}

// StopWithGrace sends sig to the child's group, then SIGKILL after grace
// if it is still alive.
func (c *Child) StopWithGrace(sig syscall.Signal, grace time.Duration) {
	c.signalGroup(sig)
	go func() {
		select {
		case <-c.exited:
		case <-time.After(grace):
			c.Kill()
		}
	}()
}

// Kill sends SIGKILL to the child's whole process group.
func (c *Child) Kill() {
	c.mu.Lock()
	c.escalated = true
	c.mu.Unlock()
	c.signalGroup(syscall.SIGKILL)
}

// signalGroup signals the child's process group, even after the child was
// reaped: the group may outlive its leader (a daemonized worker).
func (c *Child) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-c.pid, sig); err != nil {
		syscall.Kill(c.pid, sig)
	}
}

// drainQuiet is how long the output may stay silent after the child exits
// before the drain stops even without EOF: a grandchild that outlives the
// child can hold the pty open forever.
const drainQuiet = 300 * time.Millisecond

// Wait waits for the child, drains its output to the end, restores the
// terminal and returns how it ended. It is safe to call once.
func (c *Child) Wait() *Result {
	err := c.cmd.Wait()
	end := time.Now()
	jobDone(c.pid)
	close(c.exited)
	res := &Result{Pid: c.pid, Start: c.start, End: end, Code: -1}
	if ps := c.cmd.ProcessState; ps != nil {
		ws := ps.Sys().(syscall.WaitStatus)
		switch {
		case ws.Exited():
			res.Code = ws.ExitStatus()
		case ws.Signaled():
			res.Signal = ws.Signal()
			res.CoreDumped = ws.CoreDump()
		}
	} else if err != nil {
		res.Code = 125
	}
	c.mu.Lock()
	if c.killTimer != nil {
		c.killTimer.Stop()
	}
	res.Stop, res.Escalated, res.Keyboard = c.stop, c.escalated, c.keyboard
	c.mu.Unlock()
	c.drain()
	c.stopSignals()
	if c.restoreTerm != nil {
		c.restoreTerm()
	}
	for _, st := range c.streams {
		d := st.dropped.Load()
		select {
		case <-st.done:
		default:
			// The write of the last chunk read is still stuck (a stdout that
			// never takes anything): give it what close(2) of a full pipe would.
			select {
			case <-st.done:
			case <-time.After(5 * time.Second):
				d = st.dropped.Load() + st.writeLen.Load()
			}
		}
		res.StdoutDropped += d
		res.StdoutClosed = res.StdoutClosed || st.broken.Load()
		res.ReaderGone = res.ReaderGone || st.gone.Load()
	}
	for _, st := range c.streams {
		select {
		case <-st.done:
			st.src.Close()
		default: // still in a write; the descriptor stays with it
		}
	}
	res.LogErr = c.fan.logErr
	return res
}

// drain waits for the streams to reach their end, or for the output to go
// quiet when something else still holds them open.
func (c *Child) drain() {
	done := make(chan struct{})
	go func() {
		for _, st := range c.streams {
			<-st.eof
		}
		close(done)
	}()
	for {
		select {
		case <-done:
			return
		case <-time.After(drainQuiet):
			if time.Since(c.LastOutput()) >= drainQuiet {
				// Cancel the blocked reads; data already read is kept.
				for _, st := range c.streams {
					st.src.SetReadDeadline(time.Now())
				}
				select {
				case <-done:
				case <-time.After(time.Second):
				}
				return
			}
		}
	}
}

// RestoreTerminal puts the terminal back the way it was: for panics and
// fatal paths in the caller.
func (c *Child) RestoreTerminal() {
	if c.restoreTerm != nil {
		c.restoreTerm()
	}
}
