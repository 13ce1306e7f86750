// Package repro plans and runs the escalated re-run of a crash (kcrash
// repro): the bundle's command, in its directory, with the current
// environment plus the escalation its verdict calls for (the vendor's sync
// profile, kernel-API logging with tensor dumps of only the suspect call, no
// CUDA graphs for an SGLang launch), N times, each a normal `kcrash run` with
// its own bundle; and it writes repro.py, a standalone script that replays
// the dumped call.
package repro

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/collectors"
	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/triage"
)

// Redacted is what a bundle holds in place of a secret.
const Redacted = "[REDACTED]"

// Original is what a bundle says about the run to reproduce.
type Original struct {
	Path     string
	Command  []string
	Cwd      string
	Profiles []string
	Set      map[string]string // what kcrash set for the child (profiles and --env)
	Verdict  string
	Suspect  string
	Format   string // kernel-API log format: "sglang", "flashinfer", "mixed", ""
	Vendor   string // "amd", "nvidia", "" (from the evidence)
	Exit     string
}

// Load reads the original run from a bundle.
func Load(path string) (*Original, error) {
	b, err := bundle.Open(path)
	if err != nil {
		return nil, err
	}
	m := b.Manifest
	if len(m.Command) == 0 {
		return nil, fmt.Errorf("%s: the manifest records no command (a bundle of `kcrash collect` or `attach`?): nothing to re-run", path)
	}
	o := &Original{Path: path, Command: m.Command, Cwd: m.Cwd, Profiles: m.Env.Profiles, Set: collectors.WithoutPyStacks(m.Env.Set)}
	var res triage.Result
	if len(m.Triage) > 0 && json.Unmarshal(m.Triage, &res) == nil {
		o.Verdict = string(res.Verdict.Kind)
		o.Suspect = triage.SuspectAPI(res)
		if res.KernelAPI != nil {
			o.Format = res.KernelAPI.Format
		}
		o.Vendor = triage.Vendor(res.Findings, m.Host.GPUs)
	} else {
		o.Vendor = triage.Vendor(nil, m.Host.GPUs)
	}
	switch {
	case m.Exit.Signal != nil:
		o.Exit = *m.Exit.Signal
	case m.Exit.Code != nil:
		o.Exit = fmt.Sprintf("exit %d", *m.Exit.Code)
	}
	return o, nil
}

// Options shape the plan.
type Options struct {
	Times  int
	Extra  []string // appended to the command
	Out    string   // directory of the runs (absolute)
	Vendor string   // "amd", "nvidia", "none" to override the evidence; "" to follow it
	Level  int      // kernel-API level of the runs; 0 means 10 (5 plus the dumps)
	// TrustEnv re-applies the bundle's variables that change what runs
	// (ChangesWhatRuns); without it they are withheld.
	TrustEnv bool
}

// Plan is what kcrash repro will run.
type Plan struct {
	Orig     *Original
	Times    int
	Out      string
	Dir      string
	Command  []string // the command, escalated, with the extra args
	Profiles []string
	Level    int
	// Env are the --env overrides: the escalation's own variables, and what
	// the original run set beyond its profiles (secrets excepted).
	Env   []string
	Notes []string
	// Withheld are the original's variables that change what runs, not
	// re-applied (K=V); with TrustEnv, Trusted are those re-applied.
	Withheld, Trusted []string
	// SyncProfile is "rocm-sync", "cuda-sync" or "".
	SyncProfile string
	SGLang      bool
}

// SGLang entry points that take ServerArgs, so --disable-cuda-graph.
var sglangModules = []string{"sglang.launch_server", "sglang.bench_one_batch", "sglang.bench_offline_throughput", "sglang.bench_one_batch_server"}

// isSGLangLaunch: `python -m sglang.launch_server …`, a launch_server.py
// path, or `sglang serve`.
func isSGLangLaunch(argv []string) bool {
	for i, a := range argv {
		for _, m := range sglangModules {
			if a == m && i > 0 && argv[i-1] == "-m" {
				return true
			}
			if strings.HasSuffix(a, strings.ReplaceAll(m, ".", "/")+".py") {
				return true
			}
		}
		if filepath.Base(a) == "sglang" && i+1 < len(argv) && argv[i+1] == "serve" {
			return true
		}
	}
	return false
}

// fnmatchEscape quotes the characters fnmatch treats specially, so that the
// include pattern matches exactly the one API name.
func fnmatchEscape(s string) string {
	r := strings.NewReplacer("[", "[[]", "*", "[*]", "?", "[?]")
	return r.Replace(s)
}

// NewPlan chooses the escalation for o. profiles are the known profiles
// (configs.Profiles), to tell the original's profile variables from its own.
func NewPlan(o *Original, opt Options, profiles map[string]configs.Profile) (*Plan, error) {
	if opt.Times <= 0 {
		opt.Times = 1
	}
	if opt.Level == 0 {
		opt.Level = 10
	}
	p := &Plan{Orig: o, Times: opt.Times, Out: opt.Out, Dir: o.Cwd, Level: opt.Level}
	if p.Dir == "" {
		return nil, fmt.Errorf("%s: the manifest records no working directory", o.Path)
	}

	// Profiles: the original's, with kernel-API logging for its format,
	// and the vendor's sync profile.
	var names []string
	for _, n := range o.Profiles {
		if n != "none" && n != "cuda-sync" && n != "rocm-sync" {
			names = append(names, n)
		}
	}
	has := func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	if o.Format == "flashinfer" || o.Format == "mixed" {
		if !has("flashinfer") {
			names = append(names, "flashinfer")
		}
	}
	if o.Format != "flashinfer" && !has("sglang") {
		names = append(names, "sglang")
	}
	vendor, why := o.Vendor, "the evidence"
	if opt.Vendor != "" {
		vendor, why = opt.Vendor, "--vendor"
	}
	switch vendor {
	case "amd":
		p.SyncProfile = "rocm-sync"
		p.Notes = append(p.Notes, "sync profile rocm-sync: "+why+" shows an AMD GPU (HIP)")
	case "nvidia":
		p.SyncProfile = "cuda-sync"
		p.Notes = append(p.Notes, "sync profile cuda-sync: "+why+" shows an NVIDIA GPU (CUDA)")
	case "none":
		p.Notes = append(p.Notes, "no sync profile (--vendor none)")
	case "":
		p.Notes = append(p.Notes, "no sync profile: the evidence names no GPU vendor (no HIP/CUDA wording, no GPU in the manifest); say --vendor amd|nvidia to add one")
	default:
		return nil, fmt.Errorf("--vendor %q: want amd, nvidia or none", opt.Vendor)
	}
	if p.SyncProfile != "" {
		names = append(names, p.SyncProfile)
	}
	p.Profiles = names

	// The escalation's own variables win over the current environment.
	level := fmt.Sprint(opt.Level)
	if has("sglang") {
		p.Env = append(p.Env, "SGLANG_KERNEL_API_LOGLEVEL="+level)
	}
	if contains(names, "flashinfer") {
		p.Env = append(p.Env, "FLASHINFER_LOGLEVEL="+level)
	}
	if opt.Level >= 10 {
		if o.Suspect == "" {
			p.Level = 5
			p.Env = replaceLevel(p.Env, "5")
			p.Notes = append(p.Notes, "level 5, no tensor dumps: the bundle names no suspect call to limit them to")
		} else {
			pat := fnmatchEscape(o.Suspect)
			p.Env = append(p.Env, "SGLANG_KERNEL_API_DUMP_INCLUDE="+pat, "FLASHINFER_DUMP_INCLUDE="+pat)
			p.Notes = append(p.Notes, fmt.Sprintf("kernel-API level %d: statistics of every call (level 5), tensor dumps only of %s", opt.Level, o.Suspect))
			if contains(names, "flashinfer") {
				p.Notes = append(p.Notes, "FlashInfer: some versions also limit the level-3+ log to FLASHINFER_DUMP_INCLUDE, so its other calls are logged by name only")
			}
		}
	}
	if p.SyncProfile != "" {
		if pr, ok := profiles[p.SyncProfile]; ok {
			for _, k := range sortedKeys(pr.Env) {
				p.Env = append(p.Env, k+"="+pr.Env[k])
			}
		}
	}

	// What the original run set beyond its profiles came from its --env.
	profVars := map[string]bool{}
	for _, pr := range profiles {
		for k := range pr.Env {
			profVars[k] = true
		}
	}
	own := map[string]bool{}
	for _, kv := range p.Env {
		k, _, _ := strings.Cut(kv, "=")
		own[k] = true
	}
	for _, k := range sortedKeys(o.Set) {
		v := o.Set[k]
		switch {
		case profVars[k] || own[k]:
		case strings.Contains(v, Redacted):
			p.Notes = append(p.Notes, fmt.Sprintf("%s is not set from the bundle: its value was redacted there (the current environment's %s applies, if any)", k, k))
		case ChangesWhatRuns(k) && !opt.TrustEnv:
			p.Withheld = append(p.Withheld, k+"="+v)
		case ChangesWhatRuns(k):
			p.Trusted = append(p.Trusted, k+"="+v)
			p.Env = append(p.Env, k+"="+v)
		default:
			p.Env = append(p.Env, k+"="+v)
		}
	}

	p.Command = append([]string(nil), o.Command...)
	if isSGLangLaunch(o.Command) {
		p.SGLang = true
		for _, f := range []string{"--disable-cuda-graph", "--disable-prefill-cuda-graph"} {
			if !contains(p.Command, f) {
				p.Command = append(p.Command, f)
			}
		}
		p.Notes = append(p.Notes, "an SGLang launch: CUDA graphs off (--disable-cuda-graph --disable-prefill-cuda-graph), so the log shows every call")
	} else {
		p.Notes = append(p.Notes, fmt.Sprintf("not an SGLang launch (%s): its arguments are left as they are; if it starts SGLang itself, add --disable-cuda-graph --disable-prefill-cuda-graph there", filepath.Base(o.Command[0])))
	}
	p.Command = append(p.Command, opt.Extra...)
	return p, nil
}

func replaceLevel(env []string, level string) []string {
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "SGLANG_KERNEL_API_LOGLEVEL" || k == "FLASHINFER_LOGLEVEL" {
			env[i] = k + "=" + level
		}
	}
	return env
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RunDir is run i's directory (1-based): its bundle and its work directory.
func (p *Plan) RunDir(i int) string { return filepath.Join(p.Out, fmt.Sprintf("run-%d", i)) }

// WorkDir is run i's kernel-API logs and dumps.
func (p *Plan) WorkDir(i int) string { return filepath.Join(p.RunDir(i), "work") }

// RunArgs are the arguments of `kcrash` for run i.
func (p *Plan) RunArgs(i int) []string {
	args := []string{"run", "--out", p.RunDir(i), "--workdir", p.WorkDir(i),
		"--profile", strings.Join(p.Profiles, ","), "--level", fmt.Sprint(p.Level)}
	for _, kv := range p.Env {
		args = append(args, "--env", kv)
	}
	args = append(args, "--")
	return append(args, p.Command...)
}
