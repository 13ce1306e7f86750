package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"os"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/capture"
	"github.com/kcrash/kcrash/cluster"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/supervisor"
	"github.com/kcrash/kcrash/upload"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// runOptions are `kcrash run`'s flags, the command and the config they were
// completed from.
type runOptions struct {
	IO               *streams
	oneP             bool        // see capture.RunJob.OneP
	args             []string    // the command to run
	cfg              *userConfig // the config file the flags' defaults came from
	profile          string
	level            int
	env              []string
	out              string
	collect          string
	stopGrace        time.Duration
	healthInterval   time.Duration
	termLog          string
	noPty            bool
	ring             byteSize
	logFile          string
	collectorTimeout time.Duration
	killAfter        time.Duration
	hangTimeout      time.Duration
	healthURL        string
	hangAction       string
	snapshotSignal   string
	sampleInterval   time.Duration
	collectors       string
	skipCollectors   string
	workdir          string
	keepWorkdir      bool
	upload           string
	budget           byteSize
	quiet            bool
	config           string
}

func init() { register(func(s *streams) *cobra.Command { return newRunCmd(s, nil) }) }

func newRunCmd(s *streams, runF func(*runOptions) error) *cobra.Command {
	o := &runOptions{IO: s, ring: 16 << 20, budget: bundle.DefaultBudget}
	c := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...]",
		Short: "Run a command, pass its output through, and bundle the evidence if it crashes",
		Long: `Run CMD under a pty (or pipes with --no-pty) with the debug environment of the
chosen profiles, pass its output through untouched, keep its tail in a ring
buffer, watch kernel messages, GPU and host memory while it runs, and write one
crash bundle when it exits abnormally. kcrash ends as CMD did: its exit status,
or death by the same signal (a shell's $? is then 128+N; as PID 1, kcrash exits
128+N); 125/126/127 when CMD could not be run.`,
		Example: `  kcrash run -- bash run_qwen3.5_mxfp4.sh
  kcrash run --profile sglang,rocm-sync --level 5 -- python3 -m sglang.launch_server ...
  srun kcrash run --out /shared/kcrash -- python3 train.py`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("run: no command given (usage: kcrash run [flags] -- CMD [ARGS...])")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := loadConfig(o.config)
			if err != nil {
				return &exitError{code: reportRunFailure(s, err)}
			}
			if err := applyDefaults(c.Flags(), cfg); err != nil {
				return &exitError{code: reportRunFailure(s, err)}
			}
			o.args, o.cfg = args, cfg
			if runF != nil {
				return runF(o)
			}
			// The pumps on one P while the child runs (capture.RunJob.OneP),
			// unless the user chose GOMAXPROCS.
			o.oneP = os.Getenv("GOMAXPROCS") == ""
			return runRun(c.Context(), o)
		},
	}
	c.Flags().SetInterspersed(false)
	f := c.Flags()
	f.StringVar(&o.profile, "profile", configs.DefaultProfile, "environment profiles `NAMES`, comma-separated (see kcrash profiles)")
	f.IntVar(&o.level, "level", 3, "kernel-API log `LEVEL` (1, 3, 5, 10)")
	f.StringArrayVar(&o.env, "env", nil, "set `K=V` for the child, overriding the user's value (repeatable)")
	f.StringVar(&o.out, "out", "", "bundle `DIR` (default $KCRASH_OUT, else ./kcrash-bundles)")
	f.StringVar(&o.collect, "collect", "crash", "`WHEN` to write a bundle: crash, always, never")
	f.BoolVar(&o.noPty, "no-pty", false, "use pipes instead of a pty; stdout and stderr kept apart")
	f.Var(&o.ring, "ring", "bytes of output kept for the bundle")
	f.StringVar(&o.logFile, "log", "", "also write the full output to `FILE`")
	f.DurationVar(&o.collectorTimeout, "collector-timeout", 10*time.Second, "deadline for each collector")
	f.DurationVar(&o.killAfter, "kill-after", 0, "after forwarding SIGTERM/SIGINT, SIGKILL the child's group when it is still alive after this long")
	f.DurationVar(&o.stopGrace, "stop-grace", 20*time.Second, "under a scheduler or as a container's init: a child still running this long after their SIGTERM is hung in shutdown and gets a hang bundle (0: never)")
	f.DurationVar(&o.hangTimeout, "hang-timeout", 0, "declare a hang when the child prints nothing (or --health-url does not answer) for this long; a server idle between requests prints nothing either: for servers give --health-url")
	f.DurationVar(&o.healthInterval, "health-interval", time.Second, "with --health-url: the time between two probes (each is a line in the server's access log)")
	f.StringVar(&o.healthURL, "health-url", "", "with --hang-timeout: a `URL` that answers 2xx while the server is healthy")
	f.StringVar(&o.hangAction, "hang-action", "stop", "`ACTION` on a hang: stop (bundle, then SIGTERM/SIGKILL) or bundle-only")
	f.StringVar(&o.snapshotSignal, "snapshot-signal", "", "a `SIGNAL` (e.g. USR2) that makes kcrash write a bundle of the live run instead of forwarding it")
	f.DurationVar(&o.sampleInterval, "sample-interval", time.Second, "process-tree sampling period (GPU and memory sample every 2x)")
	f.StringVar(&o.collectors, "collectors", "", "only these collectors: `NAMES`, comma-separated (see kcrash collectors)")
	f.StringVar(&o.skipCollectors, "skip-collectors", "", "collectors to leave out: `NAMES`, comma-separated")
	f.StringVar(&o.workdir, "workdir", "", "the run's work `DIR` for kernel-API logs and dumps (default: a new directory under $TMPDIR)")
	f.BoolVar(&o.keepWorkdir, "keep-workdir", false, "keep the work directory after a clean exit")
	f.StringVar(&o.upload, "upload", "", "upload the bundle to `TARGET` (see kcrash upload) when one is written")
	f.Var(&o.budget, "max-bundle-size", "compressed size budget of a bundle")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no start line")
	f.StringVar(&o.termLog, "termination-log", "", "also write the end line (verdict, bundle) to `FILE`, which kubectl describe pod shows (default "+k8sTerminationLog+" when it exists and kcrash is a container's init)")
	configFlag(c, &o.config)
	return c
}

// check refuses values that would reach the child or fail late: one line,
// before anything starts.
func (o *runOptions) check() error {
	switch o.level {
	case 1, 3, 5, 10:
	default:
		return fmt.Errorf("--level %d: want 1, 3, 5 or 10", o.level)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--kill-after", o.killAfter}, {"--hang-timeout", o.hangTimeout}, {"--collector-timeout", o.collectorTimeout}, {"--sample-interval", o.sampleInterval}, {"--stop-grace", o.stopGrace}, {"--health-interval", o.healthInterval}} {
		if d.v < 0 {
			return fmt.Errorf("%s %s: must not be negative", d.name, d.v)
		}
	}
	if o.sampleInterval == 0 {
		return fmt.Errorf("--sample-interval 0: must be positive")
	}
	if o.ring < 1 {
		return fmt.Errorf("--ring %s: must be at least 1 byte", o.ring.String())
	}
	// The ring is allocated whole at start: a size the machine cannot hold
	// must be refused here, not end in the runtime's out-of-memory crash.
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		if mem := int64(si.Totalram) * int64(si.Unit); mem > 0 && int64(o.ring) > mem/2 {
			return fmt.Errorf("--ring %s: more than half of this machine's memory (%s)", o.ring.String(), human.Bytes(mem))
		}
	}
	return nil
}

// reportRunFailure prints kcrash's own failure before the child ran: 125.
func reportRunFailure(s *streams, err error) int {
	fmt.Fprintf(s.Err, "kcrash: %v\n", err)
	return 125
}

func runRun(ctx context.Context, o *runOptions) error {
	s, cfg, args := o.IO, o.cfg, o.args
	if cfg == nil {
		cfg = &userConfig{}
	}
	fail := func(err error) error { return &exitError{code: reportRunFailure(s, err)} }
	switch o.collect {
	case "crash", "always", "never":
	default:
		return fail(fmt.Errorf("--collect %q: want crash, always or never", o.collect))
	}
	switch o.hangAction {
	case "stop", "bundle-only":
	default:
		return fail(fmt.Errorf("--hang-action %q: want stop or bundle-only", o.hangAction))
	}
	if err := o.check(); err != nil {
		return fail(err)
	}
	var snapSig syscall.Signal
	if o.snapshotSignal != "" {
		sig, ok := signalByName(o.snapshotSignal)
		if !ok {
			return fail(fmt.Errorf("--snapshot-signal %q: unknown signal", o.snapshotSignal))
		}
		if sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
			return fail(fmt.Errorf("--snapshot-signal %s: this signal cannot be caught", capture.SignalName(sig)))
		}
		snapSig = sig
	}
	if o.out == "" {
		o.out = "kcrash-bundles"
	}
	var uploadFn func(context.Context, string)
	if o.upload != "" {
		// A bad target must fail now, not after the crash it was meant for.
		if _, err := upload.ParseTarget(o.upload); err != nil {
			return fail(fmt.Errorf("--upload: %v", err))
		}
		uploadFn = func(ctx context.Context, path string) { uploadBundle(ctx, s, cfg, o.upload, path) }
	}
	profiles, err := configs.Profiles(cfg.Profiles)
	if err != nil {
		return fail(err)
	}
	if err := loadUserSignatures(cfg); err != nil {
		return fail(err)
	}
	var chosen []collectors.Named
	if o.collect != "never" {
		chosen, err = collectors.Select(splitList(o.collectors), splitList(o.skipCollectors))
		if err != nil {
			return fail(err)
		}
	}
	recoverStages(s, captureConfig(cfg, o.out, o.collectorTimeout, o.budget), true)
	err = capture.Run(ctx, s, capture.RunJob{
		Args: args, Profiles: profiles, Profile: o.profile, Level: o.level,
		UserEnv: append(cfg.envList(), o.env...), Workdir: o.workdir, KeepWorkdir: o.keepWorkdir,
		OneP: o.oneP, Collect: o.collect, NoPty: o.noPty, Ring: int64(o.ring), LogFile: o.logFile, KillAfter: o.killAfter,
		SampleInterval: o.sampleInterval, SnapshotSignal: snapSig, Quiet: o.quiet,
		Hang:   capture.Hang{Timeout: o.hangTimeout, HealthURL: o.healthURL, HealthInterval: o.healthInterval, Action: o.hangAction, KillAfter: o.killAfter},
		Chosen: chosen, Job: cluster.Identity(os.Getenv),
		Config:     captureConfig(cfg, o.out, o.collectorTimeout, o.budget),
		StopReason: func(r *supervisor.Result) (string, bool) { return userStop(r, os.Getenv) },
		StopGrace:  o.stopGrace,
		EndLine:    termLogWriter(s, o.termLog),
		OutsideStop: func(syscall.Signal) (string, bool) {
			who := schedulerOf(os.Getenv)
			return who, who != ""
		},
		Upload: uploadFn,
	})
	var ee *capture.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.Code, sig: ee.Signal}
	}
	return err
}

// userStop says why a run counts as stopped by the user, or "" when it does
// not: kcrash received SIGINT (or SIGTERM/SIGHUP outside a batch scheduler
// and outside a container's init, where those mean a time limit, preemption
// or eviction) and the child ended of it; or the child died of a SIGINT typed
// on the terminal whose keys kcrash passes on.
func userStop(r *supervisor.Result, getenv func(string) string) (by string, outside bool) {
	if r.Stop != 0 {
		ended := r.Signal == r.Stop || r.Signal == syscall.SIGKILL && r.Escalated || r.Signal == 0 && (r.Code == 128+int(r.Stop) || r.Code == 0)
		switch {
		case !ended:
		case r.Stop == syscall.SIGINT:
			return "the user (" + capture.SignalName(r.Stop) + " sent to kcrash)", false
		case r.Stop == syscall.SIGTERM || r.Stop == syscall.SIGHUP:
			// A time limit, preemption, a cancel, a rolling restart: the job
			// was stopped, it did not crash. A child still running
			// --stop-grace later gets its hang bundle (capture.StopHang).
			if sched := schedulerOf(getenv); sched != "" {
				return sched + " (" + capture.SignalName(r.Stop) + ": a time limit, preemption, a cancel or a restart)", true
			}
			return "the user (" + capture.SignalName(r.Stop) + " sent to kcrash)", false
		}
		return "", false
	}
	if r.Keyboard && r.Signal == syscall.SIGINT {
		return "the user (^C typed on the terminal)", false
	}
	if r.ReaderGone && (r.Signal == 0 || r.Signal == syscall.SIGPIPE || r.Signal == syscall.SIGHUP) {
		// `kcrash run ... | head -1`: the child ended the way it would have
		// without kcrash once its output's reader was gone (SIGPIPE, a
		// hangup, or its own exit after EPIPE: Python's BrokenPipeError).
		return "the reader of its output going away", false
	}
	return "", false
}

// schedulerOf names what would send kcrash a SIGTERM other than a user: a
// batch scheduler's time limit or preemption, a container runtime stopping
// the container kcrash is the init of.
func schedulerOf(getenv func(string) string) string {
	for _, v := range []struct{ env, name string }{{"SLURM_JOB_ID", "slurm"}, {"PBS_JOBID", "pbs"}, {"LSB_JOBID", "lsf"}, {"KUBERNETES_SERVICE_HOST", "kubernetes"}} {
		if getenv(v.env) != "" {
			return v.name
		}
	}
	if os.Getpid() == 1 {
		return "container init"
	}
	return ""
}

func (c *userConfig) envList() []string {
	var out []string
	for k, v := range c.Env {
		out = append(out, k+"="+v)
	}
	return out
}

// termLogWriter is where the run's end line also goes for Kubernetes: the
// --termination-log file, or /dev/termination-log when kcrash is the
// container's init and the kubelet made that file. nil when neither.
func termLogWriter(s *streams, path string) func(string) {
	explicit := path != ""
	if !explicit {
		if os.Getpid() != 1 {
			return nil
		}
		path = k8sTerminationLog
	}
	return func(line string) {
		if err := writeTerminationLog(path, "kcrash: "+line, explicit); err != nil {
			fmt.Fprintf(s.Err, "kcrash: --termination-log: %v\n", err)
		}
	}
}
