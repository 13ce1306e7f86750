package capture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/scratch"
	"github.com/kcrash/kcrash/supervisor"
	"github.com/kcrash/kcrash/supervisor/ringbuf"
)

// RunJob is `kcrash run`'s settings, checked by the command.
type RunJob struct {
	Args []string
	// OneP runs kcrash on one P while the child runs (see waitOneP).
	OneP bool
	// Profiles are the known profiles; Profile the ones chosen, as given
	// ("sglang,rocm-sync"), and Level the kernel-API log level.
	Profiles map[string]configs.Profile
	Profile  string
	Level    int
	// UserEnv are K=V settings for the child over the user's environment
	// (the config file's, then --env).
	UserEnv     []string
	Workdir     string // "": a new directory under $TMPDIR
	KeepWorkdir bool
	Collect     string // "crash", "always", "never"
	NoPty       bool
	Ring        int64
	LogFile     string
	KillAfter   time.Duration
	// SampleInterval is the process tree's sampling period.
	SampleInterval time.Duration
	SnapshotSignal syscall.Signal // 0: none
	Quiet          bool
	Hang           Hang
	Chosen         []collectors.Named
	Job            *bundle.Job
	Config         Config
	// StopReason says who stopped the run ("the user (…)", "slurm (…)"; ""
	// when nobody did): then it is not a crash. Outside says the stop came
	// from a scheduler or a container runtime, which gets one line saying so.
	StopReason func(*supervisor.Result) (by string, outside bool)
	// StopGrace: after a SIGTERM that OutsideStop says came from a scheduler
	// or a container runtime, a child still running this long later is hung
	// in its shutdown, and gets a hang bundle while there is still time
	// (0: never).
	StopGrace   time.Duration
	OutsideStop func(syscall.Signal) (who string, ok bool)
	// EndLine, when set, is given the run's last line (how it ended, the
	// verdict, the bundle) without "kcrash: ": Kubernetes' termination log.
	EndLine func(line string)
	// Upload sends a written bundle (--upload); nil for none.
	Upload func(ctx context.Context, path string)
}

// ExitError is how a run ends when kcrash must not exit 0: Code is the exit
// status; Signal, when set, the signal kcrash should die of (the child
// did). What went wrong is already printed.
type ExitError struct {
	Code   int
	Signal syscall.Signal
}

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Run runs a command under supervision and bundles the evidence when it
// ends abnormally (or is declared hung, or asked for a snapshot):
//
//  1. prepare: the work directory, the child's environment, the ring;
//  2. start the child, the process tree's tracker and the collectors' watchers;
//  3. wait for its end (snapshots and a hang are bundled while it runs);
//  4. write the bundle, keep or remove the work directory, say how it ended;
//  5. upload.
//
// Its error is an *ExitError carrying the child's status.
func Run(ctx context.Context, io *iostreams.IOStreams, o RunJob) (err error) {
	if ctx == nil {
		ctx = context.Background()
	}

	// 1. prepare
	r, err := prepareRun(o)
	if err != nil {
		fmt.Fprintf(io.Err, "kcrash: %v\n", err)
		return &ExitError{Code: 125}
	}
	defer r.close()

	// 2. start
	snaps := &snapshotter{}
	sopts := supervisor.Options{Args: o.Args, Env: r.resolved.Env, NoPty: o.NoPty, Stdin: io.In, Stdout: io.Out, Stderr: io.Err,
		Ring: r.ring, KillAfter: o.KillAfter}
	if r.log != nil {
		sopts.Log = r.log
	}
	stops := &stopWatch{}
	sopts.OnSignal = func(sig os.Signal) bool {
		if o.SnapshotSignal != 0 && sig == o.SnapshotSignal {
			snaps.trigger()
			return true
		}
		if sig == syscall.SIGTERM && o.StopGrace > 0 && o.OutsideStop != nil {
			if who, ok := o.OutsideStop(syscall.SIGTERM); ok {
				stops.arm(who)
			}
		}
		return false // forwarded
	}
	if o.SnapshotSignal != 0 {
		sopts.Caught = []syscall.Signal{o.SnapshotSignal}
	}
	// The start line goes out before the child starts: then it can neither
	// land in the middle of the child's first line nor meet a terminal
	// already made raw.
	if !o.Quiet {
		fmt.Fprintf(io.Err, "kcrash: supervising %s (profile %s, level %d); bundles go to %s\n",
			filepath.Base(o.Args[0]), o.Profile, o.Level, o.Config.Out)
	}
	child, err := supervisor.Start(sopts)
	if err != nil {
		code := 125
		if se, ok := err.(*supervisor.StartError); ok {
			code = se.Code
		}
		fmt.Fprintf(io.Err, "kcrash: %v\n", err)
		return &ExitError{Code: code}
	}
	defer func() {
		// A bug in kcrash must not leave the user's terminal raw or the child orphaned.
		if r := recover(); r != nil {
			child.RestoreTerminal()
			child.Kill()
			panic(r)
		}
	}()
	// kcrash's own lines from here on: the terminal may be raw now. Only
	// where stdout and stderr are one file (a terminal, 2>&1) is the
	// child's output on the line kcrash's next line would continue.
	var follow func() (byte, int64)
	if supervisor.SameFile(io.Out, io.Err) {
		follow = r.ring.Last
	}
	io = &iostreams.IOStreams{In: io.In, Out: io.Out, Err: newLineWriter(io.Err, follow)}
	env := r.env
	start := child.StartTime()
	env.Start, env.RootPid = start, child.Pid()
	env.Since = start.Add(-KmsgMargin)
	watchCtx, stopWatch := context.WithCancel(ctx)
	stopWatching := watchTree(watchCtx, stopWatch, env, child.Pid(), o.Args, start, o.SampleInterval, o.Chosen)
	p := &Session{IO: io, Config: o.Config, Env: env, Chosen: o.Chosen, Args: o.Args, Cwd: env.Cwd, Job: o.Job,
		Resolved: r.resolved, Profiles: splitList(o.Profile), Level: o.Level, Hang: o.Hang, AfterCollect: r.ring.Free}
	snaps.ready(func() { p.Snapshot("snapshot", nil) })
	stops.start(watchCtx, child, o.StopGrace, p.StopHang)
	if o.Hang.Timeout > 0 {
		go watchHang(watchCtx, child, o.Hang, func() { p.Snapshot("hang", child) })
	}

	// 3. wait
	res := waitOneP(child, o.OneP)
	stopWatching(child.Pid())
	snaps.wait()
	if res.LogErr != nil {
		fmt.Fprintf(io.Err, "kcrash: --log %s: %v (the full log stops there; the ring still has the tail)\n", o.LogFile, res.LogErr)
	}

	// 4. write, and say how it ended
	bundlePath := finishRun(io, o, p, r.work, res)

	// 5. upload
	if bundlePath != "" && o.Upload != nil {
		o.Upload(ctx, bundlePath)
	}
	if code := res.ExitStatus(); code != 0 {
		return &ExitError{Code: code, Signal: res.Signal}
	}
	return nil
}

// runPrep is what a run needs before its child starts.
type runPrep struct {
	work     *workdir
	resolved *configs.Resolved
	log      *os.File // --log, or nil
	pystacks *collectors.PyStacks
	ring     *ringbuf.Ring
	env      *collectors.Env
}

// prepareRun makes the work directory, the child's environment, the
// --log file and the ring.
func prepareRun(o RunJob) (*runPrep, error) {
	// What killed runs left: their hooks, their empty work directories.
	scratch.Sweep(collectors.PyStacksPrefix, false)
	scratch.Sweep(workdirPrefix, true)
	w, err := newWorkdir(o.Workdir)
	if err != nil {
		return nil, err
	}
	r := &runPrep{work: w}
	r.resolved, err = configs.Resolve(o.Profiles, splitList(o.Profile), o.Level, w.dir, os.Environ(), o.UserEnv)
	if err != nil {
		w.cleanup()
		return nil, err
	}
	if r.resolved.PythonStacks {
		// Without the hook a hang bundle has only kernel stacks: not a reason
		// to refuse the run.
		if r.pystacks, err = addPyStacks(r.resolved); err != nil {
			fmt.Fprintf(os.Stderr, "kcrash: no Python stacks on a hang: %v\n", err)
		}
	}
	if o.LogFile != "" {
		if r.log, err = os.Create(o.LogFile); err != nil {
			r.close()
			return nil, fmt.Errorf("--log: %v", err)
		}
	}
	r.ring = ringbuf.New(int(o.Ring))
	// The ring is kcrash's only large allocation; keep the garbage of
	// sampling from growing the heap beyond it (target: ring + 30 MiB).
	debug.SetMemoryLimit(o.Ring + 20<<20)
	cwd, _ := os.Getwd()
	r.env = collectors.NewEnv()
	r.env.Output = r.ring.WriteTo
	r.env.KernelAPILogs = r.resolved.Logs
	r.env.WorkDir = w.dir
	r.env.Cwd = cwd
	r.env.SampleInterval = o.SampleInterval
	if r.pystacks != nil {
		r.env.PyStacksDir = r.pystacks.StacksDir()
	}
	return r, nil
}

// addPyStacks writes the Python-stacks hook and puts it in the child's
// environment: first on PYTHONPATH (the user's after it), with the marker.
func addPyStacks(res *configs.Resolved) (*collectors.PyStacks, error) {
	pp := ""
	for _, kv := range res.Env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			pp = v
		}
	}
	ps, err := collectors.NewPyStacks(pp)
	if err != nil {
		return nil, err
	}
	for _, kv := range ps.Env {
		k, v, _ := strings.Cut(kv, "=")
		replaced := false
		for i := range res.Env {
			if strings.HasPrefix(res.Env[i], k+"=") {
				res.Env[i], replaced = kv, true
			}
		}
		if !replaced {
			res.Env = append(res.Env, kv)
		}
		res.Set[k] = v
		delete(res.Kept, k)
	}
	return ps, nil
}

func (r *runPrep) close() {
	if r.log != nil {
		r.log.Close()
	}
	if r.pystacks != nil {
		r.pystacks.Remove()
	}
	r.work.cleanup()
}

// watchTree starts the process tree's tracker and the collectors' watchers
// until ctx is done. The function it returns, called once the root has been
// reaped, records that, cancels ctx (stop) and waits for them to stop.
func watchTree(ctx context.Context, stop context.CancelFunc, env *collectors.Env, pid int, args []string, start time.Time, interval time.Duration, chosen []collectors.Named) func(reaped int) {
	tracker := supervisor.NewTracker(pid)
	tracker.Seed(args, start)
	env.Tree = tracker
	var trackDone sync.WaitGroup
	trackDone.Add(2)
	go func() { defer trackDone.Done(); tracker.Run(ctx, interval) }()
	// Process events (root only) catch workers that live less than a sample.
	go func() { defer trackDone.Done(); tracker.Events(ctx) }()
	stopWatchers := collectors.StartWatchers(ctx, env, chosen)
	return func(reaped int) {
		tracker.MarkExited(reaped)
		stop()
		trackDone.Wait()
		stopWatchers(2 * time.Second)
	}
}

// finishRun writes the bundle a run's end calls for, keeps or removes the
// work directory, and prints the end line; it returns the bundle's path
// ("" for none).
func finishRun(io *iostreams.IOStreams, o RunJob, p *Session, w *workdir, res *supervisor.Result) string {
	// A run the user stopped (^C, kill) is not a crash: no bundle unless
	// --collect always, and then its verdict is "killed".
	outside := false
	if o.StopReason != nil {
		p.StoppedBy, outside = o.StopReason(res)
	}
	abnormal := (res.Signal != 0 || res.Code != 0) && p.StoppedBy == ""
	write := o.Collect == "always" || o.Collect == "crash" && abnormal
	// After a crash the work directory is kept when it holds more than the
	// bundle took (kernel-API logs beyond the tail, level-10 dumps, GPU cores).
	// A run that writes no bundle leaves nothing behind (--keep-workdir aside).
	keepWork := w.made && (o.KeepWorkdir || write && abnormal && !workdirInBundle(w.dir))
	if keepWork && abnormal {
		p.Note("the work directory %s is kept: it holds more than the bundle (full kernel-API logs, dumps)", w.dir)
	}
	// A declared hang already has its bundle, taken while the tree was alive.
	bundlePath, bundleSize, hang := p.HangBundle()
	if write && !hang {
		bundlePath, bundleSize = p.Write(res, false)
	}
	if keepWork && bundlePath == "" && !o.KeepWorkdir && dirEmpty(w.dir) {
		keepWork = false
	}
	w.remove = !keepWork
	if keepWork && bundlePath == "" && !o.KeepWorkdir {
		fmt.Fprintf(io.Err, "kcrash: no bundle was written; the work directory %s is kept with the evidence it holds\n", w.dir)
	}
	if outside && bundlePath == "" {
		// A rolling restart or a time limit is not a crash, but a line in
		// the job's log says why the bundle the user may look for is absent.
		line := fmt.Sprintf("kcrash: %s %s after %s, stopped by %s: not a crash, no bundle (--collect always keeps one)",
			filepath.Base(o.Args[0]), describeExit(res), human.Duration(res.End.Sub(res.Start)), p.StoppedBy)
		fmt.Fprintln(io.Err, line)
		endLine(o, line)
	}
	// One end line per run: a hang's line, printed when it was declared,
	// already named its bundle.
	if (abnormal || bundlePath != "") && !hang {
		line := fmt.Sprintf("kcrash: %s %s after %s", filepath.Base(o.Args[0]), describeExit(res), human.Duration(res.End.Sub(res.Start)))
		if v := p.LastVerdict(); bundlePath != "" && v.Kind != "" {
			line += ": " + verdictWords(v)
		}
		if bundlePath != "" {
			line += fmt.Sprintf("; bundle %s (%s)", DisplayPath(bundlePath), human.Bytes(bundleSize))
		}
		fmt.Fprintln(io.Err, line)
		endLine(o, line)
	} else if hang {
		endLine(o, p.HangLine())
	}
	if res.StdoutDropped > 0 && !res.StdoutClosed {
		fmt.Fprintf(io.Err, "kcrash: stdout did not keep up: %s of output were not passed through (the ring and --log have them)\n", human.Bytes(res.StdoutDropped))
	}
	return bundlePath
}

// workdir is the run's work directory (kernel-API logs, dumps).
type workdir struct {
	dir string
	// made: kcrash made it; remove says whether it goes away at the end:
	// always, unless it holds evidence (see Run).
	made, remove bool
}

// oneP is how long a child runs before kcrash goes down to one P.
const oneP = time.Second

// waitOneP waits for the child; with one, it runs kcrash on one P from a
// second after the start to the child's end, like the single thread of tini
// or script(1). The pumps wait in the runtime's poller, and with more Ps
// each 4 KiB chunk from the pty woke other threads to look for work
// (strace -c -f of 32 MiB through the pty: 25,000 system calls, 18,000 with
// one P). The start (collectors' first samples) and the bundle keep every
// P: on one from the start, `kcrash run -- true` took 5 to 10 ms longer.
func waitOneP(child *supervisor.Child, one bool) *supervisor.Result {
	if !one {
		return child.Wait()
	}
	procs := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	ended := false
	t := time.AfterFunc(oneP, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			runtime.GOMAXPROCS(1)
		}
	})
	res := child.Wait()
	t.Stop()
	mu.Lock()
	ended = true
	runtime.GOMAXPROCS(procs)
	mu.Unlock()
	return res
}

// workdirPrefix names the work directories kcrash makes under $TMPDIR.
const workdirPrefix = "kcrash-run-"

func newWorkdir(dir string) (*workdir, error) {
	w := &workdir{dir: dir, remove: true}
	if dir == "" {
		d, err := scratch.Mkdir(workdirPrefix)
		if err != nil {
			return nil, fmt.Errorf("work directory: %v", err)
		}
		w.dir, w.made = d, true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("work directory: %v", err)
	}
	if abs, err := filepath.Abs(w.dir); err == nil {
		w.dir = abs
	}
	return w, nil
}

func (w *workdir) cleanup() {
	if w.made && w.remove {
		os.RemoveAll(w.dir)
	}
}

// workdirInBundle reports whether everything in the run's work directory is
// in the bundle: only kernel-API log files, within the tail the bundle keeps.
func workdirInBundle(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	var total int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".log") {
			return false
		}
		total += fi.Size()
	}
	return total <= collectors.KernelAPITail
}

func dirEmpty(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) == 0
}

func describeExit(r *supervisor.Result) string {
	if r.Signal != 0 {
		d := "died of " + SignalName(r.Signal)
		if r.CoreDumped {
			d += " (core dumped)"
		}
		return d
	}
	return fmt.Sprintf("exited with status %d", r.Code)
}

// snapshotter runs one live snapshot at a time on request. A request can
// come as soon as the child runs, before the session that writes the
// snapshot exists: it is kept and served once the session is ready, never
// dropped.
type snapshotter struct {
	mu      sync.Mutex
	running bool
	pending bool // asked for before ready
	wg      sync.WaitGroup
	run     func()
}

// ready sets what a snapshot runs, and runs one asked for before.
func (s *snapshotter) ready(run func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run = run
	if s.pending {
		s.pending = false
		s.startLocked()
	}
}

func (s *snapshotter) trigger() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.run == nil:
		s.pending = true
	case !s.running:
		s.startLocked()
	}
}

func (s *snapshotter) startLocked() {
	s.running = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run()
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
}

func (s *snapshotter) wait() { s.wg.Wait() }

// splitList is "a, b,c" as [a b c].
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func endLine(o RunJob, line string) {
	if o.EndLine != nil && line != "" {
		o.EndLine(strings.TrimPrefix(line, "kcrash: "))
	}
}
