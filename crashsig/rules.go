package crashsig

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/triage"
)

// DefaultRules is the pipeline, in order. Extraction first, cause rules
// after it (they replace what extraction found), the title last.
var DefaultRules = []Rule{
	faultRecord{},
	kernelAPICall{},
	inAppFrames{},
	causeRule{},
	title{},
	sanitizeTitle{},
}

// stableField is a detail of a fault record that is the same for every
// occurrence of one bug. Coarse fields also make the coarse key, which groups
// one fault class in one call whatever the frames and the engine.
type stableField struct {
	key    string
	coarse bool
	clean  func(c *Context, v string) string
}

// stableFields are kept in this order; every other detail (addresses, pids,
// pasid, vmid, ring numbers, timestamps, sizes, line numbers) is dropped.
var stableFields = []stableField{
	{key: "event"},
	{key: "category", coarse: true}, // the Xid catalog's class: memory_ecc, pcie_bus
	{key: "hub", clean: stripIndex}, // gfxhub0 and gfxhub are one hub
	{key: "client", clean: identifier},
	{key: "utcl2_client", clean: stripIndex}, // SDMA0/SDMA1: instances of one engine
	{key: "retry"},
	{key: "ring", clean: ringName},
	{key: "engine", clean: stripIndex},
	{key: "hub_client", clean: stripIndex},
	{key: "fault_type"},
	{key: "access_type"},
	{key: "contained"},
	{key: "rpc_function"},
	{key: "unit", clean: normalized},
	{key: "block", clean: rasBlock},
	{key: "trap"},
	{key: "scope"}, // a host OOM kill: global or at a cgroup's limit
	{key: "exception", coarse: true},
	{key: "status", coarse: true, clean: identifier},
	{key: "code", coarse: true, clean: identifier},
	{key: "collective", coarse: true},
	{key: "resource", coarse: true},
	{key: "call", coarse: true},
	{key: "software_issue", coarse: true},
	{key: "package"},
	{key: "library", clean: baseName},
	{key: "object", clean: libraryName},
	{key: "reason", clean: normalized},
	{key: "function"},
	{key: "assert_file", clean: baseName},
	{key: "assertion", clean: normalized},
}

// messageRedundant: a message is only part of the key when no structured
// field already says what it says (an Xid 31 message repeats the engine
// with its instance number).
var messageRedundant = []string{"status", "code", "reason", "fault_type", "exception", "assertion", "collective", "resource"}

// faultRecord adds the verdict kind and the fault record's stable fields.
type faultRecord struct{}

func (faultRecord) Name() string                   { return "fault-record" }
func (faultRecord) Applies(*Context, *Result) bool { return true }
func (faultRecord) Apply(c *Context, r *Result) {
	kind := c.Verdict
	if kind == "" {
		kind = evidence.Unknown
	}
	both := func(p string) { r.Fine, r.Coarse = append(r.Fine, p), append(r.Coarse, p) }
	both("kind=" + string(kind))
	roots := rootFindings(c)
	if v := vendorOf(roots); v != "" {
		both("vendor=" + v)
	}
	if x := xidOf(roots); x != 0 {
		both("xid=" + strconv.Itoa(x))
	}
	if bits := amdFaultBits(roots); bits != "" {
		r.Fine = append(r.Fine, "faults="+bits)
	}
	if rw := field(roots, "rw"); rw != "" && field(roots, "event") == "vm_fault" {
		r.Fine = append(r.Fine, "access="+map[bool]string{true: "write", false: "read"}[rw == "0x1"])
	}
	for _, sf := range stableFields {
		v := field(roots, sf.key)
		if sf.clean != nil {
			v = sf.clean(c, v)
		}
		if v == "" {
			continue
		}
		p := sf.key + "=" + v
		r.Fine = append(r.Fine, p)
		if sf.coarse {
			r.Coarse = append(r.Coarse, p)
		}
	}
	if msg := field(roots, "message"); msg != "" && !slices.ContainsFunc(messageRedundant, func(k string) bool { return field(roots, k) != "" }) {
		r.Fine = append(r.Fine, "message="+c.Table.Normalize(msg))
	}
	if s := signalOf(c, roots); s != "" {
		both("signal=" + s)
	}
	r.notef("fault-record", "%d root finding(s) of %s", len(roots), kind)
}

func vendorOf(roots []evidence.Finding) string {
	if v := field(roots, "vendor"); v != "" {
		return v
	}
	switch field(roots, "runtime") {
	case "HIP":
		return "amd"
	case "CUDA":
		return "nvidia"
	}
	return ""
}

// amdFaultBits names the amdgpu fault status bits that are set.
func amdFaultBits(roots []evidence.Finding) string {
	var bits []string
	for _, b := range []struct{ key, name string }{{"permission_faults", "PERMISSION"}, {"mapping_error", "MAPPING"}, {"walker_error", "WALKER"}} {
		v := field(roots, b.key)
		if n, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64); err == nil && n != 0 {
			bits = append(bits, b.name)
		}
	}
	return strings.Join(bits, "+")
}

// signalOf is the fatal signal: the record's own, else the run's exit signal
// when the verdict is a crash of the process itself.
func signalOf(c *Context, roots []evidence.Finding) string {
	if s := field(roots, "signal"); s != "" {
		return s
	}
	if c.Verdict == evidence.NativeCrash || c.Verdict == evidence.Unknown {
		return c.Signal
	}
	return ""
}

var (
	trailingIndex = regexp.MustCompile(`^([A-Za-z_]*[A-Za-z_])\d+$`)
	identRe       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)
	soVersion     = regexp.MustCompile(`(\.so)(?:\.\d+)+$|-\d+(?:\.\d+)+(\.so)`)
)

func stripIndex(_ *Context, v string) string {
	if m := trailingIndex.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return v
}

// identifier keeps v when it is a name (HSA_STATUS_ERROR_MEMORY_FAULT,
// hipErrorIllegalAddress), not a register value or a number.
func identifier(_ *Context, v string) string {
	if identRe.MatchString(v) {
		return v
	}
	return ""
}

// ringName keeps an amdgpu ring's name without its instance numbers
// (gfx_0.0.0 is gfx, sdma0 is sdma); an interrupt ring number is dropped.
func ringName(_ *Context, v string) string {
	if v == "" || unicode.IsDigit(rune(v[0])) {
		return ""
	}
	return strings.TrimRight(strings.TrimRight(v, "0123456789._"), "_")
}

// rasBlock keeps an amdgpu RAS block (umc, gfx, sdma), not a device
// assert's block index ("[0,0,0]"), which changes with every launch.
func rasBlock(_ *Context, v string) string {
	if strings.HasPrefix(v, "[") {
		return ""
	}
	return v
}

func normalized(c *Context, v string) string { return c.Table.Normalize(v) }

func baseName(_ *Context, v string) string {
	if v == "" {
		return ""
	}
	return path.Base(v)
}

// libraryName drops the version from a shared object's name: libc-2.32.so
// and libc-2.35.so fault in one libc.
func libraryName(_ *Context, v string) string {
	if v == "" {
		return ""
	}
	return soVersion.ReplaceAllString(path.Base(v), "$1$2")
}

// kernelAPICall adds the call a GPU fault is pinned on (triage's suspect) with
// the dtypes and tensor ranks of its arguments, never their sizes.
type kernelAPICall struct{}

func (kernelAPICall) Name() string { return "kernel-api-call" }
func (kernelAPICall) Applies(c *Context, _ *Result) bool {
	return suspectAPI(c) != ""
}
func (kernelAPICall) Apply(c *Context, r *Result) {
	api := suspectAPI(c)
	r.Fine, r.Coarse = append(r.Fine, "api="+api), append(r.Coarse, "api="+api)
	if ka := c.KernelAPI; ka != nil {
		call := ka.UnfinishedCall
		if call == nil || call.API != api {
			call = ka.LastCall
		}
		if call != nil && call.API == api {
			var args []string
			for _, a := range call.Args {
				if a.Dtype == "" || len(args) == 8 {
					continue
				}
				args = append(args, fmt.Sprintf("%s:%s/%d", a.Name, a.Dtype, shapeRank(a.Shape)))
			}
			if len(args) > 0 {
				r.Fine = append(r.Fine, "args="+strings.Join(args, ","))
			}
		}
	}
	r.notef("kernel-api-call", "suspect call %s", api)
}

// suspectAPI is the API of triage's suspect finding.
func suspectAPI(c *Context) string {
	for _, f := range c.Findings {
		if f.Details.Text(detail.VerdictRole) == triage.RoleSuspect {
			if api := f.Details.Text(detail.API); api != "" {
				return api
			}
		}
	}
	return ""
}

// shapeRank counts a shape's dimensions: "[4, 4096]", "(2, 128, 8)",
// "torch.Size([3])"; 0 for a scalar.
func shapeRank(s string) int {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "torch.Size("), ")")
	s = strings.Trim(s, "[]() ")
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimRight(s, ", "), ",") + 1
}

// maxFrames is how many in-app frames the fine key holds (ABRT's N = 3).
const maxFrames = 3

// inAppFrames adds the innermost Python frames that are not library
// plumbing (the table's skip list) nor the standard library.
type inAppFrames struct{}

func (inAppFrames) Name() string { return "in-app-frames" }
func (inAppFrames) Applies(c *Context, _ *Result) bool {
	return len(framesOf(rootFindings(c))) > 0
}
func (inAppFrames) Apply(c *Context, r *Result) {
	n := 0
	for _, fr := range framesOf(rootFindings(c)) {
		mod, fn, ok := splitFrame(fr)
		if !ok {
			continue
		}
		key := mod + ":" + fn
		if c.Table.Skip(key) {
			continue
		}
		r.Fine = append(r.Fine, "frame="+key)
		if n++; n == maxFrames {
			break
		}
	}
	r.notef("in-app-frames", "%d frame(s) kept", n)
}

// framesOf is the first root finding's Python frames, innermost first.
func framesOf(roots []evidence.Finding) []string {
	for _, f := range roots {
		switch v := f.Details["frames"].(type) {
		case []any:
			var out []string
			for _, x := range v {
				if s, ok := x.(string); ok {
					out = append(out, s)
				}
			}
			if len(out) > 0 {
				return out
			}
		case []string:
			if len(v) > 0 {
				return v
			}
		}
		if file, fn := f.Details.Text(detail.FrameFile), f.Details.Text(detail.FrameFunc); file != "" && fn != "" {
			return []string{file + ":0 in " + fn}
		}
	}
	return nil
}

var pyStdlib = regexp.MustCompile(`/lib/python\d+(?:\.\d+)?/`)

// splitFrame turns "/x/site-packages/sglang/srt/a.py:268 in forward" into
// ("sglang/srt/a.py", "forward"): the path from the package root, so that
// one package installed in two places is one frame. A standard library frame
// reports !ok.
func splitFrame(fr string) (mod, fn string, ok bool) {
	loc, fn, found := strings.Cut(fr, " in ")
	if !found {
		return "", "", false
	}
	file := loc
	if i := strings.LastIndexByte(loc, ':'); i > 0 {
		file = loc[:i]
	}
	for _, root := range []string{"/site-packages/", "/dist-packages/"} {
		if i := strings.LastIndex(file, root); i >= 0 {
			return file[i+len(root):], strings.TrimSpace(fn), true
		}
	}
	if pyStdlib.MatchString(file) {
		return "", "", false
	}
	// An application's own file: its last two path elements, which survive
	// a checkout in another directory.
	parts := strings.Split(strings.Trim(file, "/"), "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/"), strings.TrimSpace(fn), true
}

// cause is a known cause that replaces the stack: every occurrence is one
// bucket whatever the program did (Socorro's BadHardware, OOMSignature).
type cause struct {
	name  string
	class string
	match func(roots []evidence.Finding) bool
}

func xidIs(codes ...int) func([]evidence.Finding) bool {
	return func(roots []evidence.Finding) bool { return slices.Contains(codes, xidOf(roots)) }
}

// causes are tried in order; the first that matches wins.
var causes = []cause{
	{"gpu-fell-off-bus", ClassHardware, func(roots []evidence.Finding) bool {
		return xidOf(roots) == 79 || field(roots, "event") == "fallen_off_bus"
	}},
	{"gpu-uncorrectable-ecc", ClassHardware, xidIs(48, 95)},
	{"gpu-contained-ecc", ClassHardware, xidIs(94)},
	{"gpu-reset-required", ClassHardware, xidIs(154)},
	{"amdgpu-ras-uncorrectable", ClassHardware, func(roots []evidence.Finding) bool {
		return field(roots, "event") == "ras_error"
	}},
	{"build-mismatch", ClassSoftware, func(roots []evidence.Finding) bool {
		return field(roots, "software_issue") != ""
	}},
}

// Causes lists the cause rules' names and classes, for help text and docs.
func Causes() [][2]string {
	out := make([][2]string, len(causes))
	for i, c := range causes {
		out[i] = [2]string{c.name, c.class}
	}
	return out
}

type causeRule struct{}

func (causeRule) Name() string { return "cause" }
func (causeRule) Applies(c *Context, _ *Result) bool {
	_, ok := matchCause(rootFindings(c))
	return ok
}
func (causeRule) Apply(c *Context, r *Result) {
	roots := rootFindings(c)
	k, _ := matchCause(roots)
	r.Cause, r.Class = k.name, k.class
	r.Fine, r.Coarse = []string{"cause=" + k.name}, []string{"cause=" + k.name}
	if v := vendorOf(roots); v != "" {
		r.Fine = append(r.Fine, "vendor="+v)
	}
	if x := xidOf(roots); x != 0 {
		r.Fine = append(r.Fine, "xid="+strconv.Itoa(x))
	}
	for _, key := range []string{"block", "software_issue", "package"} {
		if v := field(roots, key); v != "" {
			r.Fine = append(r.Fine, key+"="+v)
		}
	}
	r.notef("cause", "%s (%s): the stack does not matter", k.name, k.class)
}

func matchCause(roots []evidence.Finding) (cause, bool) {
	for _, k := range causes {
		if k.match(roots) {
			return k, true
		}
	}
	return cause{}, false
}

// titleKeys are the parts a title shows, in order, after the kind.
var titleKeys = []string{"vendor", "xid", "event", "ring", "scope", "trap", "hub", "utcl2_client", "engine", "faults", "fault_type", "status", "code",
	"exception", "collective", "resource", "software_issue", "package", "block", "object", "reason", "assert_file", "signal"}

type title struct{}

func (title) Name() string                   { return "title" }
func (title) Applies(*Context, *Result) bool { return true }
func (title) Apply(c *Context, r *Result) {
	vals := map[string]string{}
	var frame string
	for _, p := range r.Fine {
		k, v, _ := strings.Cut(p, "=")
		if k == "frame" && frame == "" {
			frame = v
		}
		if _, seen := vals[k]; !seen {
			vals[k] = v
		}
	}
	var words []string
	if r.Cause != "" {
		words = append(words, r.Cause, "|")
	} else {
		words = append(words, vals["kind"])
	}
	for _, k := range titleKeys {
		switch v := vals[k]; {
		case v == "":
		case k == "event" && (v == "xid" || v == "vm_fault"):
		case k == "xid":
			words = append(words, "Xid "+v)
		default:
			words = append(words, v)
		}
	}
	if r.Cause == "" {
		if api := vals["api"]; api != "" {
			words = append(words, "in", api)
		} else if frame != "" {
			words = append(words, "at", frame)
		}
	}
	r.Title = strings.Join(words, " ")
}

// sanitizeTitle is syzkaller's: control characters dropped, spaces
// collapsed, at most MaxTitle characters.
type sanitizeTitle struct{}

func (sanitizeTitle) Name() string                   { return "sanitize-title" }
func (sanitizeTitle) Applies(*Context, *Result) bool { return true }
func (sanitizeTitle) Apply(_ *Context, r *Result)    { r.Title = Sanitize(r.Title) }

// Sanitize drops control characters, collapses spaces and cuts s to
// MaxTitle characters.
func Sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if rs := []rune(s); len(rs) > MaxTitle {
		s = strings.TrimSpace(string(rs[:MaxTitle]))
	}
	return s
}
