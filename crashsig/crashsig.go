// Package crashsig computes a bundle's crash signature: a versioned key that
// is the same for every occurrence of one bug (whatever its addresses, pids,
// GPUs, shapes or rank prefixes) and differs between bugs, so that bundles
// from a fleet can be counted in buckets.
//
// It is a pipeline of rules over triage's result, after Socorro's signature
// generator: extraction rules add parts (the fault record's stable fields,
// the suspect kernel-API call, the top in-app frames), cause rules replace
// them when the cause is known (Xid 79 is gpu-fell-off-bus whatever the
// stack), and the last rules build the title. Free text goes through the
// normalisation table of configs/normalize.yaml first.
package crashsig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/triage"
)

// Version is bumped whenever a rule, a part's spelling or the normalisation
// table changes what a signature is: buckets of different versions are never
// compared by hash.
const Version = 1

// MaxTitle is syzkaller's title cap.
const MaxTitle = 120

// Classes a cause rule can set on a signature.
const (
	ClassHardware = "hardware" // the record itself is a hardware fault (ECC, fell off the bus, RAS)
	ClassSoftware = "software" // the record itself names a software cause (a build mismatch)
)

// Input is what a signature is computed from: triage's result for one run.
type Input struct {
	Verdict   evidence.Kind
	Findings  []evidence.Finding
	KernelAPI *kernelapi.Report
	Signal    string // the run's exit signal, "" when none
}

// FromTriage is the input for a triage result and the run's exit signal.
func FromTriage(res triage.Result, signal string) Input {
	return Input{Verdict: res.Verdict.Kind, Findings: res.Findings, KernelAPI: res.KernelAPI, Signal: signal}
}

// FromManifest is the input for a bundle's manifest.
func FromManifest(m *bundle.Manifest) (Input, error) {
	var res triage.Result
	if len(m.Triage) == 0 || string(m.Triage) == "null" {
		return Input{}, fmt.Errorf("the manifest holds no triage")
	}
	if err := json.Unmarshal(m.Triage, &res); err != nil {
		return Input{}, fmt.Errorf("manifest triage: %v", err)
	}
	sig := ""
	if m.Exit.Signal != nil {
		sig = *m.Exit.Signal
	}
	return FromTriage(res, sig), nil
}

// Result is the signature as the rules build it.
type Result struct {
	Fine   []string // parts of the fine key, in order: "kind=gpu_page_fault", "hub=gfxhub", ...
	Coarse []string // parts of the coarse key
	Title  string
	Cause  string // the cause rule that fired, "" when none
	Class  string // ClassHardware, ClassSoftware or ""
	Notes  []string
}

func (r *Result) notef(rule, format string, a ...any) {
	r.Notes = append(r.Notes, rule+": "+fmt.Sprintf(format, a...))
}

// Context is what rules read: the input and the normalisation table.
type Context struct {
	Input
	Table *Table
}

// Rule is one step of the pipeline. A rule whose Applies is false leaves the
// result alone.
type Rule interface {
	Name() string
	Applies(c *Context, r *Result) bool
	Apply(c *Context, r *Result)
}

// Compute runs the default rules over in with the built-in table.
func Compute(in Input) bundle.Signature { return ComputeWith(in, DefaultRules, Builtin()) }

// ComputeWith runs rules over in, normalising free text with t.
func ComputeWith(in Input, rules []Rule, t *Table) bundle.Signature {
	c := &Context{Input: in, Table: t}
	var r Result
	for _, rule := range rules {
		if rule.Applies(c, &r) {
			rule.Apply(c, &r)
		}
	}
	return bundle.Signature{
		Version: Version, Fine: hash("fine", r.Fine), Coarse: hash("coarse", r.Coarse),
		Title: r.Title, Class: r.Class, Key: strings.Join(r.Fine, " | "), Notes: r.Notes,
	}
}

func hash(what string, parts []string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("kcrash-sig v%d %s\n%s", Version, what, strings.Join(parts, "\n"))))
	return hex.EncodeToString(h[:8])
}

// rootFindings are the findings the verdict rests on, in triage's order
// (root cause first); the first finding when none is marked.
func rootFindings(in *Context) []evidence.Finding {
	var out []evidence.Finding
	for _, f := range in.Findings {
		if f.Details.Text(detail.VerdictRole) == triage.RoleRootCause {
			out = append(out, f)
		}
	}
	if len(out) == 0 && len(in.Findings) > 0 && in.Verdict != evidence.CleanExit {
		out = in.Findings[:1]
	}
	return out
}

// field is the first root finding's value of key, "" when none has it.
func field(roots []evidence.Finding, key string) string {
	for _, f := range roots {
		if v := f.Details.Text(detail.Text(key)); v != "" {
			return v
		}
	}
	return ""
}

// xidOf is the first root finding's Xid, 0 when none.
func xidOf(roots []evidence.Finding) int {
	for _, f := range roots {
		if f.Xid != 0 {
			return f.Xid
		}
	}
	return 0
}
