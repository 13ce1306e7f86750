package collectors

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/execx"
)

func init() {
	Register(Info{Name: "coredump", Description: "where the child's core dump went (core_pattern, file or pipe handler), as raw/coredump.json; the core stays out of the bundle", Default: true},
		func() Collector {
			return &coredumpCollector{coredumpDir: "/var/lib/systemd/coredump", lookPath: exec.LookPath, wait: 3 * time.Second}
		})
}

// dumpSignals are the signals whose default action dumps core (signal(7)).
var dumpSignals = map[syscall.Signal]bool{syscall.SIGQUIT: true, syscall.SIGILL: true, syscall.SIGTRAP: true,
	syscall.SIGABRT: true, syscall.SIGBUS: true, syscall.SIGFPE: true, syscall.SIGSEGV: true,
	syscall.SIGXCPU: true, syscall.SIGXFSZ: true, syscall.SIGSYS: true}

// CoreDump is raw/coredump.json.
type CoreDump struct {
	Pid         int        `json:"pid"`
	Signal      string     `json:"signal,omitempty"`
	CoreDumped  bool       `json:"core_dumped"` // what wait(2) said
	Pattern     string     `json:"pattern"`
	CoreUsesPid bool       `json:"core_uses_pid,omitempty"`
	Kind        string     `json:"kind"`              // "file" or "pipe"
	Handler     string     `json:"handler,omitempty"` // pipe: the program the kernel runs
	HandlerOK   *bool      `json:"handler_present,omitempty"`
	Searched    []string   `json:"searched,omitempty"` // globs tried
	Found       bool       `json:"found"`
	Path        string     `json:"path,omitempty"`
	SizeBytes   int64      `json:"size_bytes,omitempty"`
	DiskBytes   int64      `json:"disk_bytes,omitempty"` // allocated: cores are sparse
	ModTime     *time.Time `json:"mtime,omitempty"`
	Note        string     `json:"note,omitempty"`
}

type coredumpCollector struct {
	coredumpDir string // systemd-coredump's store
	lookPath    func(string) (string, error)
	wait        time.Duration // how long a pipe handler may take to store the core
}

// coreSignal turns ExitSignal ("SIGSEGV", "SEGV", "segmentation fault",
// "11") into a signal number; 0 when unknown.
func coreSignal(s string) syscall.Signal {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	if n, err := strconv.Atoi(s); err == nil {
		return syscall.Signal(n)
	}
	up := strings.ToUpper(s)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	for i := syscall.Signal(1); i < 65; i++ {
		if strings.EqualFold(i.String(), s) || coreSigName(i) == up {
			return i
		}
	}
	return 0
}

func coreSigName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP",
		syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS", syscall.SIGKILL: "SIGKILL",
		syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP", syscall.SIGPIPE: "SIGPIPE",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGALRM: "SIGALRM"}
	return names[s]
}

func (c *coredumpCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	sig := coreSignal(env.ExitSignal)
	if !env.CoreDumped && !dumpSignals[sig] {
		if env.ExitSignal != "" {
			return Skip("no core dump: the child was killed by %s, which does not dump core", env.ExitSignal)
		}
		return Skip("no core dump: the child did not die by a signal")
	}
	if env.RootPid <= 0 {
		return Skip("no core dump: no child process")
	}
	d := c.locate(ctx, env, sig)
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := out.WriteFile("raw/coredump.json", append(b, '\n')); err != nil {
		return err
	}
	if d.CoreDumped || d.Found {
		env.AddFinding(coreFinding(d))
	}
	return nil
}

func coreFinding(d CoreDump) evidence.Finding {
	var text string
	switch {
	case d.Found:
		text = fmt.Sprintf("core dumped: %s (%d bytes)", d.Path, d.SizeBytes)
	case d.Kind == "pipe":
		text = fmt.Sprintf("core dumped to the pipe handler %s; %s", d.Handler, d.Note)
	default:
		text = fmt.Sprintf("core dumped but not found (pattern %q): %s", d.Pattern, d.Note)
	}
	details := map[string]any{"pattern": d.Pattern, "kind": d.Kind, "found": d.Found, "path": d.Path, "size_bytes": d.SizeBytes}
	if d.Handler != "" {
		details["handler"] = d.Handler
	}
	if d.Note != "" {
		details["note"] = d.Note
	}
	return evidence.Finding{Kind: evidence.NativeCrash, Source: evidence.SourceExit, Text: text, Pid: d.Pid,
		File: "raw/coredump.json", Details: details, Attribution: "pid-in-tree"}
}

// locate follows core_pattern to the core. Never fails: what could not be
// found is said in Note.
func (c *coredumpCollector) locate(ctx context.Context, env *Env, sig syscall.Signal) CoreDump {
	d := CoreDump{Pid: env.RootPid, Signal: env.ExitSignal, CoreDumped: env.CoreDumped}
	if d.Signal == "" && sig != 0 {
		d.Signal = coreSigName(sig)
	}
	pat, err := os.ReadFile(env.Proc("sys", "kernel", "core_pattern"))
	if err != nil {
		d.Note = "cannot read core_pattern: " + err.Error()
		return d
	}
	d.Pattern = strings.TrimRight(string(pat), "\n")
	if b, err := os.ReadFile(env.Proc("sys", "kernel", "core_uses_pid")); err == nil {
		d.CoreUsesPid = strings.TrimSpace(string(b)) == "1"
	}
	if strings.HasPrefix(d.Pattern, "|") {
		c.locatePipe(ctx, env, &d)
		return d
	}
	d.Kind = "file"
	glob := coreExpand(d.Pattern, env, sig)
	if d.CoreUsesPid && !strings.Contains(d.Pattern, "%p") {
		// The kernel appends ".<pid>" in this case (core(5)).
		glob += "." + strconv.Itoa(env.RootPid)
	}
	if !filepath.IsAbs(glob) {
		// Relative patterns land in the crashing process's cwd.
		cwd := env.Cwd
		if cwd == "" {
			cwd = "."
		}
		glob = filepath.Join(coreGlobEscape(cwd), glob)
	}
	d.Searched = []string{glob}
	c.pick(&d, env, glob)
	if !d.Found && d.Note == "" {
		switch {
		case !env.CoreDumped:
			d.Note = fmt.Sprintf("%s usually dumps core, but the kernel reported none: the child's core size limit (ulimit -c) was probably 0", d.Signal)
		default:
			d.Note = "the kernel reported a core dump but no file matches the pattern (the child may have changed directory, or the file was already moved)"
		}
	}
	return d
}

// pick chooses the newest file matching glob, written since the run began.
func (c *coredumpCollector) pick(d *CoreDump, env *Env, glob string) {
	matches, _ := filepath.Glob(glob)
	var best os.FileInfo
	bestPath := ""
	stale := 0
	for _, m := range matches {
		st, err := os.Stat(m)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if !env.Start.IsZero() && st.ModTime().Before(env.Start.Add(-time.Second)) {
			stale++
			continue
		}
		if best == nil || st.ModTime().After(best.ModTime()) {
			best, bestPath = st, m
		}
	}
	if best == nil {
		if stale > 0 {
			d.Note = fmt.Sprintf("%d matching file(s) predate this run: an old core, not this crash's", stale)
		}
		return
	}
	d.Found, d.Path, d.SizeBytes = true, bestPath, best.Size()
	mt := best.ModTime().UTC()
	d.ModTime = &mt
	if st, ok := best.Sys().(*syscall.Stat_t); ok {
		d.DiskBytes = st.Blocks * 512
	}
}

func (c *coredumpCollector) locatePipe(ctx context.Context, env *Env, d *CoreDump) {
	d.Kind = "pipe"
	fields := strings.Fields(strings.TrimPrefix(d.Pattern, "|"))
	if len(fields) == 0 {
		d.Note = "empty pipe handler"
		return
	}
	d.Handler = fields[0]
	_, err := os.Stat(d.Handler)
	ok := err == nil
	d.HandlerOK = &ok
	if !ok {
		// The kernel cannot run a missing handler: the core is lost.
		d.Note = fmt.Sprintf("the pipe handler %s is not installed (%v): the kernel could not hand the core to anyone, it is lost", d.Handler, err)
		return
	}
	base := filepath.Base(d.Handler)
	switch {
	case base == "systemd-coredump":
		c.locateSystemd(ctx, env, d)
	case base == "apport" || strings.HasPrefix(base, "apport"):
		d.Note = "apport handles cores: see /var/crash (and /var/lib/apport/coredump)"
		glob := fmt.Sprintf("/var/lib/apport/coredump/core.*.%d.*", env.RootPid)
		d.Searched = []string{glob}
		c.waitPick(ctx, d, env, glob)
	case strings.Contains(base, "abrt"):
		d.Note = "abrt handles cores: see /var/spool/abrt (abrt-cli list)"
	default:
		d.Note = fmt.Sprintf("the kernel piped the core to %s; where it stores cores is up to that program", d.Handler)
	}
}

// locateSystemd finds the core in systemd-coredump's store, whose names are
// core.<comm>.<uid>.<boot id>.<pid>.<usec>[.zst|.lz4|.xz], asking
// coredumpctl when it is installed.
func (c *coredumpCollector) locateSystemd(ctx context.Context, env *Env, d *CoreDump) {
	glob := filepath.Join(coreGlobEscape(c.coredumpDir), fmt.Sprintf("core.*.*.*.%d.*", env.RootPid))
	d.Searched = []string{glob}
	c.waitPick(ctx, d, env, glob)
	if d.Found {
		return
	}
	if p, err := c.lookPath("coredumpctl"); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := execx.Run(cctx, nil, p, "info", "--no-pager", strconv.Itoa(env.RootPid))
		cancel()
		if err == nil {
			for _, l := range strings.Split(string(res.Stdout), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Storage:"); ok {
					path, _, _ := strings.Cut(strings.TrimSpace(v), " ")
					if st, err := os.Stat(path); err == nil {
						d.Found, d.Path, d.SizeBytes = true, path, st.Size()
						return
					}
					d.Note = "coredumpctl: " + strings.TrimSpace(v)
					return
				}
			}
			d.Note = "coredumpctl info: " + gpuFirstLine(append(res.Stdout, res.Stderr...))
			return
		}
		d.Note = "coredumpctl: " + err.Error()
		return
	}
	d.Note = fmt.Sprintf("systemd-coredump handles cores but none for pid %d is in %s (it may have been too big for its limits, or is still being written)", env.RootPid, c.coredumpDir)
}

// waitPick polls a little: a pipe handler may still be writing when the
// child's exit is reported.
func (c *coredumpCollector) waitPick(ctx context.Context, d *CoreDump, env *Env, glob string) {
	deadline := time.Now().Add(c.wait)
	for {
		c.pick(d, env, glob)
		if d.Found || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var coreSpecRe = regexp.MustCompile(`%.`)

// coreExpand turns a core_pattern into a glob. Specifiers whose value is
// known here (pid, signal, host, comm) are filled in; the others (time,
// uid, tid...) become "*".
func coreExpand(pattern string, env *Env, sig syscall.Signal) string {
	comm := coreComm(env)
	host, _ := os.Hostname()
	return coreSpecRe.ReplaceAllStringFunc(pattern, func(s string) string {
		switch s[1] {
		case '%':
			return "%"
		case 'p', 'P':
			return strconv.Itoa(env.RootPid)
		case 's':
			if sig != 0 {
				return strconv.Itoa(int(sig))
			}
		case 'h':
			if host != "" {
				return coreGlobEscape(host)
			}
		case 'e':
			if comm != "" {
				// The kernel writes comm with '/' replaced by '!'.
				return coreGlobEscape(strings.ReplaceAll(comm, "/", "!"))
			}
		}
		return "*"
	})
}

// coreComm is the child's comm (the kernel's %e), from the tree or /proc.
func coreComm(env *Env) string {
	if env.Tree != nil {
		for _, p := range env.Tree.Processes() {
			if int(p.Pid) == env.RootPid && p.Name != "" {
				n := p.Name
				if len(n) > 15 {
					n = n[:15]
				}
				return n
			}
		}
	}
	if c, err := env.ProcFS().Comm(env.RootPid); err == nil {
		return strings.TrimSpace(c)
	}
	return ""
}

func coreGlobEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// Available: a child dumps a core only with a core limit above 0, and a
// piped core_pattern sends it to a handler rather than a file.
func (c *coredumpCollector) Available(env *Env) (Availability, string) {
	pattern := readTrimmed(env.Proc("sys", "kernel", "core_pattern"))
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_CORE, &lim)
	limit := "unlimited"
	if lim.Cur != unix.RLIM_INFINITY {
		limit = strconv.FormatUint(lim.Cur/1024, 10)
	}
	why := fmt.Sprintf("core_pattern %q, ulimit -c %s", pattern, limit)
	switch {
	case lim.Cur == 0:
		return WorksPartly, why + ": children dump no core unless they raise the limit"
	case strings.HasPrefix(pattern, "|"):
		return WorksPartly, why + ": cores go to a handler; kcrash names it"
	}
	return Works, why
}
