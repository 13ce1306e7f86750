package capture

import (
	"context"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/internal/iostreams"
	"github.com/kcrash/kcrash/internal/procfs"
	"github.com/kcrash/kcrash/supervisor"
	"github.com/kcrash/kcrash/supervisor/ringbuf"
)

// attachRing is the output kept of the followed logs, shared between them:
// the same as `kcrash run`'s default --ring.
const attachRing = 16 << 20

// detachWait bounds how long SIGINT waits for the ptrace detach.
const detachWait = 3 * time.Second

// target is what /proc says about the process attached to.
type target struct {
	pid int
	// who is the target's filesystem identity (fsuid, fsgid, groups): the
	// rights root reads the files named in its environment with; nil when
	// /proc/PID/status did not say.
	who   *collectors.Identity
	name  string
	args  []string
	cwd   string
	env   []string
	start time.Time
}

// procFS is where targets are read: /proc, or a fixture tree in tests.
var procFS procfs.FS

func readTarget(pid int) (*target, error) {
	t := &target{pid: pid}
	comm, err := procFS.Comm(pid)
	if err != nil {
		return nil, fmt.Errorf("no process with pid %d", pid)
	}
	t.name = strings.TrimSpace(comm)
	if st, err := procFS.Status(pid); err == nil {
		if len(st.Uid) == 4 || len(st.Gid) == 4 || st.HasGroups {
			t.who = &collectors.Identity{}
		}
		if len(st.Uid) == 4 {
			t.who.UID = st.Uid[3]
		}
		if len(st.Gid) == 4 {
			t.who.GID = st.Gid[3]
		}
		if st.HasGroups {
			t.who.Groups = st.Groups
		}
		// /proc/TID exists for every thread too; seizing a thread would watch
		// only that thread.
		if st.Tgid > 0 && st.Tgid != pid {
			return nil, fmt.Errorf("%d is a thread of process %d (%s): give --pid %d", pid, st.Tgid, t.name, st.Tgid)
		}
	}
	t.args, _ = procFS.Cmdline(pid)
	if len(t.args) == 0 {
		t.args = []string{t.name}
	}
	t.cwd, _ = procFS.Cwd(pid)
	// environ needs ptrace-read access: without it the bundle lacks the
	// target's environment and rank, and says so.
	t.env, _ = procFS.Environ(pid)
	if st, err := supervisor.ProcStartTime(pid); err == nil {
		t.start = st
	} else {
		t.start = time.Now()
	}
	return t, nil
}

func (t *target) getenv(k string) string {
	for _, kv := range t.env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// kernelAPILogs finds the kernel-API logs the target was told to write.
func (t *target) kernelAPILogs() []string {
	var out []string
	for _, k := range []string{"SGLANG_KERNEL_API_LOGDEST", "FLASHINFER_LOGDEST"} {
		v := t.getenv(k)
		if v == "" || v == "stdout" || v == "stderr" {
			continue
		}
		if !filepath.IsAbs(v) && t.cwd != "" {
			v = filepath.Join(t.cwd, v)
		}
		out = append(out, strings.ReplaceAll(v, "%i", "*"))
	}
	return out
}

// outputFiles are the target's stdout and stderr when they are regular
// files (`nohup server > server.log 2>&1 &`): with no --log, they are what
// it printed. Followed through /proc/PID/fd, which stays the file the target
// writes even if the name was reused or lives in another mount namespace.
func (t *target) outputFiles() (paths, names []string) {
	seen := map[[2]uint64]bool{}
	for _, fd := range []int{1, 2} {
		p := procFS.FD(t.pid, fd)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		id := [2]uint64{uint64(sys.Dev), sys.Ino}
		if seen[id] {
			continue
		}
		seen[id] = true
		name, err := os.Readlink(p)
		if err != nil {
			name = p
		}
		paths, names = append(paths, p), append(names, name)
	}
	return paths, names
}

// followed are the logs being tailed into rings.
type followed struct {
	names     []string
	rings     []*ringbuf.Ring
	followers []*supervisor.Follower
}

func followLogs(paths, names []string) *followed {
	f := &followed{names: names}
	if len(paths) == 0 {
		return f
	}
	size := attachRing / len(paths)
	if size < 1<<20 {
		size = 1 << 20
	}
	for _, p := range paths {
		r := ringbuf.New(size)
		f.rings = append(f.rings, r)
		// The backlog fills the ring: output from before the attach is as
		// much evidence as what follows.
		f.followers = append(f.followers, supervisor.Follow(p, r, supervisor.FollowOptions{Backlog: int64(size)}))
	}
	return f
}

func (f *followed) stop() {
	for _, fl := range f.followers {
		fl.Stop()
	}
}

// output is output.log: one log's tail as is; several under tail(1)'s
// "==> name <==" headers.
func (f *followed) output() []byte {
	if len(f.rings) == 1 {
		return f.rings[0].Bytes()
	}
	var b []byte
	for i, r := range f.rings {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, "==> "+f.names[i]+" <==\n"...)
		b = append(b, r.Bytes()...)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
	}
	return b
}

func (f *followed) notes() []string {
	var out []string
	for i, fl := range f.followers {
		st := fl.Stats()
		var what []string
		if st.Rotations > 0 {
			what = append(what, fmt.Sprintf("rotated %d time(s)", st.Rotations))
		}
		if st.Truncations > 0 {
			what = append(what, fmt.Sprintf("truncated %d time(s)", st.Truncations))
		}
		if st.Missing {
			what = append(what, "missing at the end")
		}
		if st.Bytes == 0 {
			what = append(what, "nothing read")
		}
		if len(what) > 0 {
			out = append(out, fmt.Sprintf("log %s: %s", f.names[i], strings.Join(what, ", ")))
		}
	}
	return out
}

// ProcessWatch is `kcrash attach --pid`: which process, what to follow.
type ProcessWatch struct {
	Pid  int
	Logs []string // log files to follow; none: its stdout/stderr when they are files
	// NoPtrace is why ptrace must not be used, "" when it may be: --no-ptrace
	// for a target already traced by a debugger, or a host where a ptrace
	// stop would be unwelcome (a latency-critical server receiving many
	// signals).
	NoPtrace string
	Poll     time.Duration
	Quiet    bool // no start line
	Chosen   []collectors.Named
	Config   Config
}

// AttachPid supervises a process kcrash did not start: its exit (the
// status via ptrace where permitted), its process tree, its log files, the
// same collectors and the same bundle as `kcrash run`. SIGINT, SIGTERM and
// SIGHUP detach and leave it running (ErrStopped).
//
//  1. attach: the exit watch, the followed logs, the collectors' environment;
//  2. watch until it ends or kcrash is told to detach;
//  3. how it ended; a known clean exit goes without a bundle;
//  4. the bundle.
func AttachPid(io *iostreams.IOStreams, o ProcessWatch) error {
	t, err := readTarget(o.Pid)
	if err != nil {
		return err
	}
	// Before Watch, so that a ^C during the attach is not lost.
	sigs := detachSignals()
	defer signal.Stop(sigs)

	// 1. attach
	a, err := attachTarget(io, o, t)
	if err != nil {
		return err
	}

	// 2. watch
	st, stuck := watchTarget(t, a.w, a.env, o.Chosen, sigs)
	a.logs.stop()
	if st.Detached {
		if stuck {
			fmt.Fprintf(io.Err, "kcrash: pid %d (%s) did not stop for the detach within %s (blocked in the kernel?); kcrash's exit ends the trace; no bundle\n", t.pid, t.name, detachWait)
		} else {
			fmt.Fprintf(io.Err, "kcrash: detached from pid %d (%s); it is still running; no bundle\n", t.pid, t.name)
		}
		return ErrStopped
	}

	// 3. how it ended
	ex, line := targetExit(t, st)
	// An unknown status may hide a crash: only a known clean exit goes
	// without a bundle.
	if st.Known && st.Signal == 0 && st.Code == 0 {
		fmt.Fprintln(io.Err, line+"; no bundle")
		return nil
	}

	// 4. the bundle
	return a.bundle(io, o, t, ex, line)
}

// detachSignals are the signals that make attach detach. A signal ignored
// at start (nohup's SIGHUP, a background job's SIGINT) stays ignored:
// Notify would otherwise un-ignore it.
func detachSignals() chan os.Signal {
	sigs := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	return sigs
}

// attached is a target being watched: the exit watch, the followed logs,
// the collectors' environment and the notes the bundle will carry.
type attached struct {
	w     *supervisor.Watcher
	logs  *followed
	env   *collectors.Env
	job   *bundle.Job
	notes []string
}

// attachTarget starts the exit watch and follows the target's logs (--log,
// else its stdout/stderr when they are files), then says so unless quiet.
func attachTarget(io *iostreams.IOStreams, o ProcessWatch, t *target) (*attached, error) {
	poll := o.Poll
	if poll <= 0 || poll > time.Second {
		// The flag's default suits a scheduler; /proc is cheap to look at.
		poll = time.Second
	}
	w, err := supervisor.Watch(o.Pid, supervisor.WatchOptions{NoPtrace: o.NoPtrace, Poll: poll})
	if err != nil {
		return nil, err
	}
	a := &attached{w: w}
	logPaths, logNames := o.Logs, o.Logs
	if len(logPaths) == 0 {
		logPaths, logNames = t.outputFiles()
		if len(logPaths) > 0 {
			a.notes = append(a.notes, fmt.Sprintf("no --log given: output.log follows the target's stdout/stderr file %s", strings.Join(logNames, ", ")))
		}
	}
	a.logs = followLogs(logPaths, logNames)
	a.env, a.job = t.collectorsEnv(a.logs)
	if len(t.env) == 0 {
		a.notes = append(a.notes, fmt.Sprintf("/proc/%d/environ was not readable: the target's environment and rank are not known", t.pid))
	}
	how := "with ptrace"
	if w.Method() != "ptrace" {
		how = fmt.Sprintf("without ptrace (%s), so its exit status will not be known", w.NotTracedReason())
	}
	following := ""
	if len(logNames) > 0 {
		following = "; following " + strings.Join(logNames, ", ")
	}
	if !o.Quiet {
		fmt.Fprintf(io.Err, "kcrash: attached to pid %d (%s) %s%s; bundles go to %s\n", t.pid, t.name, how, following, o.Config.Out)
	}
	return a, nil
}

// targetExit is the bundle's Exit for how the target ended, and the line
// that says so.
func targetExit(t *target, st supervisor.ExitStatus) (Exit, string) {
	ex := Exit{End: st.End, CoreDumped: st.CoreDumped, Reason: st.Reason}
	desc := ""
	switch {
	case !st.Known:
		desc = "exited (status unknown: " + st.Reason + ")"
	case st.Signal != 0:
		ex.Signal = SignalName(st.Signal)
		desc = "died of " + ex.Signal
		if st.CoreDumped {
			desc += " (core dumped)"
		}
	default:
		c := st.Code
		ex.Code = &c
		desc = fmt.Sprintf("exited with status %d", c)
	}
	return ex, fmt.Sprintf("kcrash: pid %d (%s) %s after %s", t.pid, t.name, desc, human.Duration(st.End.Sub(t.start)))
}

// bundle writes the attach bundle, with notes on how the target was watched
// and its logs followed, and ends line with where it went.
func (a *attached) bundle(io *iostreams.IOStreams, o ProcessWatch, t *target, ex Exit, line string) error {
	notes := a.notes
	if a.w.Method() == "ptrace" {
		notes = append(notes, "kcrash attached to a running process with ptrace (PTRACE_SEIZE); the exit status is the kernel's")
	} else {
		notes = append(notes, fmt.Sprintf("kcrash watched a running process with %s, not ptrace: %s", a.w.Method(), a.w.NotTracedReason()))
	}
	notes = append(notes, a.logs.notes()...)
	cfg := o.Config
	// Root attached to another user's process: its bundles are not world-readable.
	cfg.Private = a.env.ReadAs != nil
	p := &Session{IO: io, Config: cfg, Env: a.env, Chosen: o.Chosen, Args: t.args, Cwd: t.cwd, Job: a.job,
		Resolved: &configs.Resolved{Env: t.env, Set: map[string]string{}, Kept: map[string]string{}}}
	for _, n := range notes {
		p.Note("%s", n)
	}
	path, size, err := p.Bundle(ex, false, "attach")
	if err != nil {
		fmt.Fprintln(io.Err, line)
		return fmt.Errorf("no bundle written: %v", err)
	}
	fmt.Fprintf(io.Err, "%s; bundle %s (%s)\n", line, DisplayPath(path), human.Bytes(size))
	return nil
}

// collectorsEnv is the collectors' environment for the target, and its job
// (its own environment's, else kcrash's).
func (t *target) collectorsEnv(logs *followed) (*collectors.Env, *bundle.Job) {
	env := collectors.NewEnv()
	if len(logs.rings) > 0 {
		env.Output = outputFrom(logs.output)
	}
	env.KernelAPILogs = t.kernelAPILogs()
	if os.Geteuid() == 0 && (t.who == nil || t.who.UID != 0) {
		// The kernel-API log paths come from the target's environment: root
		// reads them with the target's rights (none known: nobody's).
		env.ReadAs = t.who
		if env.ReadAs == nil {
			env.ReadAs = &collectors.Identity{UID: 65534, GID: 65534, Name: "unknown (nobody's rights)"}
		}
	}
	env.Cwd = t.cwd
	env.Start, env.RootPid = t.start, t.pid
	env.Since = t.start.Add(-KmsgMargin)
	job := cluster.Identity(t.getenv)
	if job == nil {
		job = cluster.Identity(os.Getenv)
	}
	return env, job
}

// watchTarget runs the tree tracker and the collectors' watchers until the
// target ends, or a signal detaches from it (stuck: the detach did not
// complete in time).
func watchTarget(t *target, w *supervisor.Watcher, env *collectors.Env, chosen []collectors.Named, sigs chan os.Signal) (st supervisor.ExitStatus, stuck bool) {
	watchCtx, stopWatch := context.WithCancel(context.Background())
	tracker := supervisor.NewTracker(t.pid)
	env.Tree = tracker
	var trackDone sync.WaitGroup
	trackDone.Add(2)
	go func() { defer trackDone.Done(); tracker.Run(watchCtx, env.SampleInterval) }()
	go func() { defer trackDone.Done(); tracker.Events(watchCtx) }()
	stopWatchers := collectors.StartWatchers(watchCtx, env, chosen)

	select {
	case <-w.Done():
		st = w.Wait()
	case <-sigs:
		w.Detach()
		select {
		case <-w.Done():
			st = w.Wait()
		case <-sigs:
			st, stuck = supervisor.ExitStatus{Detached: true}, true
		case <-time.After(detachWait):
			// A process in the kernel (D state: a wedged GPU driver) cannot
			// reach the ptrace stop a detach needs; kcrash's exit ends the
			// trace all the same.
			st, stuck = supervisor.ExitStatus{Detached: true}, true
		}
	}
	signal.Stop(sigs)
	stopWatch()
	trackDone.Wait()
	if !st.Detached {
		// After the tracker's last sample, which may still have seen the
		// target as a zombie its parent had not reaped.
		tracker.MarkExited(t.pid)
	}
	stopWatchers(2 * time.Second)
	return st, stuck
}
