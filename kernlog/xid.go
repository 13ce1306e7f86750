package kernlog

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Xid is one entry of NVIDIA's Xid catalog as kcrash ships it in
// configs/xid.yaml.
type Xid struct {
	Code        int           `yaml:"code"`
	Mnemonic    string        `yaml:"mnemonic"`
	Description string        `yaml:"description"`
	Action      string        `yaml:"action"`      // NVIDIA's immediate-resolution bucket (RESTART_APP, RESET_GPU...)
	Investigate string        `yaml:"investigate"` // NVIDIA's investigatory-resolution bucket
	Meaning     string        `yaml:"meaning"`     // one line for a human, where the catalog's description is too terse
	Category    string        `yaml:"category"`    // kcrash's class: app_fault, memory_ecc, nvlink, hang...
	Kind        evidence.Kind `yaml:"kind"`        // the SPEC §5 kind an Xid line is reported as
	Role        string        `yaml:"role"`        // cause, consequence, info or unknown
}

// Xid roles.
const (
	RoleCause       = "cause"       // can explain a crash by itself
	RoleConsequence = "consequence" // follows another error (Xid 43 after 13, 45 after anything)
	RoleInfo        = "info"        // not a crash by itself (row remap recorded, recovery action)
	RoleUnknown     = "unknown"     // the catalog has no meaning for the code
)

// XidInfo returns the catalog entry of an Xid. An Xid newer than the
// catalog is not in it; callers should still report the line (Parse reports
// it as gpu_hardware_error with role unknown).
func XidInfo(xid int) (Xid, bool) {
	x, ok := xidCatalog()[xid]
	return x, ok
}

// xidCatalog parses the embedded catalog once. The file is part of the
// binary and covered by tests, so a parse failure is a build defect: it
// panics rather than silently reporting every Xid as unknown.
var xidCatalog = sync.OnceValue(func() map[int]Xid {
	m, err := loadXidCatalog()
	if err != nil {
		panic(err)
	}
	return m
})

func loadXidCatalog() (map[int]Xid, error) {
	b, err := configs.FS.ReadFile("xid.yaml")
	if err != nil {
		return nil, fmt.Errorf("kernlog: xid catalog: %w", err)
	}
	var doc struct {
		Xids []Xid `yaml:"xids"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("kernlog: xid catalog: %w", err)
	}
	m := make(map[int]Xid, len(doc.Xids))
	for _, x := range doc.Xids {
		if _, dup := m[x.Code]; dup {
			return nil, fmt.Errorf("kernlog: xid catalog: code %d listed twice", x.Code)
		}
		m[x.Code] = x
	}
	return m, nil
}

// nvrm handles NVIDIA driver lines.
func (p *parser) nvrm(r *rec) bool {
	t := r.text
	switch {
	case strings.Contains(t, "NVRM: Xid ("):
		return p.xid(r)
	case strings.Contains(t, "fallen off the bus"):
		p.fallenOff(r, t)
	case gpuLostLine(t):
		p.gpuLost(r, t) // gpu_lost.go
	case strings.Contains(t, "NVRM: The NVIDIA GPU "):
		p.openWrapped(r)
	case strings.Contains(t, "NVRM: GPU at PCI:"):
		p.gpuUUID(t)
	case strings.Contains(t, "RmInitAdapter failed"):
		p.rmInitFailed(r)
	case strings.Contains(t, "Rate limiting GSP RPC error prints"):
		p.gspRateLimited(t)
	default:
		return false
	}
	return true
}

// xidLine is an "NVRM: Xid (PCI:0000:9b:00[ GPU-I:05]): 119[, pid=N][, name=X], msg" line.
type xidLine struct {
	text     string // from "NVRM: Xid" on: wrappers such as Modal's "[gpu-health] ... XID: " dropped
	pci      string
	instance string // MIG GPU instance, "GPU-I:05"
	code     int
	pid      string
	name     string
	msg      string
}

func parseXid(t string) (xidLine, bool) {
	var x xidLine
	i := strings.Index(t, "NVRM: Xid (")
	if i < 0 {
		return x, false
	}
	x.text = t[i:]
	// A line quoted in source or docs ("NVRM: Xid ... D-RST: No") keeps its
	// closing quote; it is not part of the message.
	if i > 0 && (t[i-1] == '"' || t[i-1] == '\'') && strings.HasSuffix(t, t[i-1:i]) {
		t = t[:len(t)-1]
		x.text = t[i:]
	}
	rest := t[i+len("NVRM: Xid ("):]
	end := strings.IndexByte(rest, ')')
	if end < 0 || end > 64 {
		return x, false
	}
	dev := strings.TrimPrefix(rest[:end], "PCI:")
	x.pci, x.instance, _ = strings.Cut(dev, " ")
	rest = strings.TrimLeft(strings.TrimPrefix(rest[end+1:], ":"), " ")
	code, rest, ok := leadingInt(rest)
	if !ok || code < 0 || code > 1<<20 {
		return x, false
	}
	x.code = int(code)
	rest = strings.TrimLeft(strings.TrimPrefix(rest, ","), " ")
	x.pid, rest = xidField(rest, "pid=")
	x.name, rest = xidField(rest, "name=")
	x.msg = strings.TrimSpace(rest)
	return x, true
}

// xidField takes "key=value, " off the front of s. The value ends at the
// next ", " because names such as "nvc:[driver]" contain other punctuation.
func xidField(s, key string) (val, rest string) {
	if !strings.HasPrefix(s, key) {
		return "", s
	}
	s = s[len(key):]
	end := strings.Index(s, ", ")
	if end < 0 {
		return strings.Trim(s, "'"), ""
	}
	return strings.Trim(s[:end], "'"), s[end+2:]
}

func (p *parser) xid(r *rec) bool {
	x, ok := parseXid(r.text)
	if !ok {
		return false
	}
	info, known := XidInfo(x.code)
	kind := info.Kind
	if !known {
		kind, info.Role = evidence.GPUHardwareError, RoleUnknown
	}
	f := newFinding(r, kind, "xid", "nvidia")
	f.Text = clip(x.text, maxTextBytes)
	f.Xid = x.code
	f.GPU = normBDF(x.pci)
	d := f.Details
	d["pci"] = x.pci
	if x.instance != "" {
		d["gpu_instance"] = strings.TrimPrefix(x.instance, "GPU-I:")
	}
	if uuid := p.uuids[x.pci]; uuid != "" {
		d["gpu_uuid"] = uuid
	}
	if pid, rest, ok := leadingInt(x.pid); ok && rest == "" && pid > 0 {
		f.Pid = int(pid)
	}
	if x.name != "" && x.name != "<unknown>" {
		d.SetText(detail.Process, x.name)
	}
	d.SetText(detail.Message, x.msg)
	// Xid 45 names the error that made the driver tear the channel down
	// ("caused by previous Xid 149"); triage uses it when that Xid's own
	// line is not in the evidence.
	if n, ok := intAfter(x.msg, "caused by previous Xid "); ok {
		d.SetInt(detail.CausedByXid, n)
	}
	d.SetText(detail.Role, info.Role)
	d["catalogued"] = known
	for k, v := range map[string]string{"category": info.Category, "mnemonic": info.Mnemonic,
		"description": info.Description, "action": info.Action, "meaning": info.Meaning} {
		if v != "" {
			d[k] = v
		}
	}
	xidDetails(&f, x)
	key := fmt.Sprintf("xid|%d|%s|%s|%d|%s", x.code, x.pci, x.instance, f.Pid, x.name)
	p.flushBlock()
	p.emit(f, key)
	return true
}

// xidDetails pulls the structured fields each Xid's message carries.
func xidDetails(f *evidence.Finding, x xidLine) {
	d, m := f.Details, x.msg
	if ch, ok := wordAfter(" "+m, " Ch "); ok {
		d["channel"] = strings.TrimSuffix(ch, ",")
	}
	switch x.code {
	case 13:
		if loc, ok := after(m, " on ("); ok {
			if end := strings.Index(loc, "): "); end >= 0 {
				d["location"] = loc[:end]
				d.SetText(detail.Exception, loc[end+3:])
			}
		}
	case 31:
		mmuFault(f, m)
	case 48:
		if a, ok := hexAfter(m, "physAddr "); ok {
			d["phys_addr"] = hexAddr(a)
		}
	case 74:
		if link, ok := intAfter(m, " on link "); ok {
			d["link"] = link
		}
		if regs := hexWords(m); len(regs) > 0 {
			d["registers"] = regs
		}
	case 94, 95:
		contained(d, m)
	case 109:
		if s, ok := after(m, "errorString "); ok {
			s, _, _ = strings.Cut(s, ",")
			d["error_string"] = s
		}
		if v, ok := hexAfter(m, "Info "); ok {
			d["info"] = v
		}
	case 119:
		if id, ok := intAfter(m, "Expected function "); ok {
			d["rpc_function_id"] = id
			if fn, ok := after(m, "Expected function "+strconv.FormatInt(id, 10)+" ("); ok {
				d["rpc_function"], _, _ = strings.Cut(fn, ")")
			}
		}
		if to, ok := wordAfter(m, "Timeout after "); ok {
			d["timeout"] = to
		}
	case 120:
		if pc, ok := hexAfter(m, "pc:"); ok {
			d["pc"] = pc
		}
	case 154:
		recoveryAction(d, m)
	}
	if x.code >= 144 && x.code <= 150 {
		nvlink5(d, m)
	}
}

// mmuFault reads Xid 31's "MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @
// 0x7f29_5b8c9000. Fault is of type FAULT_PRIV_VIOLATION ACCESS_TYPE_VIRT_READ".
func mmuFault(f *evidence.Finding, m string) {
	d := f.Details
	if a, ok := hexAfter(m, "faulted @ "); ok {
		f.Address = hexAddr(a)
	}
	if eng, ok := after(m, "ENGINE "); ok {
		if w := strings.Fields(strings.Split(eng, " faulted")[0]); len(w) == 2 {
			d["engine"], d["hub_client"] = w[0], w[1]
		}
	}
	if ty, ok := after(m, "Fault is of type "); ok {
		w := strings.Fields(ty)
		if len(w) > 0 {
			d["fault_type"] = strings.TrimSuffix(w[0], ".")
		}
		if len(w) > 1 {
			d["access_type"] = strings.TrimSuffix(w[1], ".")
		}
	}
}

// contained reads Xid 94/95's "Contained: CE User Channel (0x9). RST: No, D-RST: No":
// RST says a GPU reset is needed, D-RST a drain and reset.
func contained(d map[string]any, m string) {
	switch {
	case strings.HasPrefix(m, "Uncontained"):
		d["contained"] = false
	case strings.HasPrefix(m, "Contained"):
		d["contained"] = true
	}
	if u, ok := after(m, "ontained: "); ok {
		u, _, _ = strings.Cut(u, ". RST")
		d["unit"] = u
	}
	if v, ok := wordAfter(m, "D-RST: "); ok {
		d["drain_reset_required"] = strings.EqualFold(strings.TrimSuffix(v, ","), "yes")
	}
	if v, ok := wordAfter(m, " RST: "); ok {
		d["reset_required"] = strings.EqualFold(strings.TrimSuffix(v, ","), "yes")
	}
}

// recoveryAction reads Xid 154's "GPU recovery action changed from 0x0
// (None) to 0x1 (GPU Reset Required)".
func recoveryAction(d map[string]any, m string) {
	if from, ok := after(m, "changed from "); ok {
		if code, name, ok := codeName(from); ok {
			d["previous_recovery_action"], d["previous_recovery_action_code"] = name, code
		}
	}
	if to, ok := after(m, ") to "); ok {
		if code, name, ok := codeName(to); ok {
			d["recovery_action"], d["recovery_action_code"] = name, code
		}
	}
}

// codeName reads "0x1 (GPU Reset Required)".
func codeName(s string) (code, name string, ok bool) {
	code, rest := leadingHex(s)
	if code == "" || !strings.HasPrefix(rest, " (") {
		return "", "", false
	}
	name, _, ok = strings.Cut(rest[2:], ")")
	return code, name, ok
}

// nvlink5 reads the Blackwell NVLink Xids (144-150): "NETIR_LINK_EVT Fatal
// XC0 i0 Link 00 (0x025001c6 0x00000000 ...)". The first two words of the
// tuple are the intrinfo and error status NVIDIA's decode table keys on.
func nvlink5(d map[string]any, m string) {
	w := strings.Fields(m)
	if len(w) < 6 || w[4] != "Link" {
		return
	}
	d["unit"], d["severity"], d["xc"], d["instance"] = w[0], w[1], w[2], w[3]
	if link, _, ok := leadingInt(w[5]); ok {
		d["link"] = link
	}
	if regs := hexWords(m); len(regs) > 0 {
		d["registers"] = regs
		d["intrinfo"] = regs[0]
		if len(regs) > 1 {
			d["error_status"] = regs[1]
		}
	}
}

// hexWords returns the 0x-prefixed words inside the first parenthesised
// group, the register dump of NVLink Xids.
func hexWords(m string) []string {
	open := strings.IndexByte(m, '(')
	if open < 0 {
		return nil
	}
	inner, _, _ := strings.Cut(m[open+1:], ")")
	var regs []string
	for w := range strings.FieldsFuncSeq(inner, func(c rune) bool { return c == ' ' || c == ',' }) {
		if strings.HasPrefix(w, "0x") {
			regs = append(regs, w)
		}
		if len(regs) == 16 {
			break
		}
	}
	return regs
}

// gpuUUID remembers "NVRM: GPU at PCI:0000:0a:00: GPU-760d0170-...".
func (p *parser) gpuUUID(t string) {
	rest, _ := after(t, "NVRM: GPU at PCI:")
	pci, uuid, ok := strings.Cut(rest, ": ")
	uuid = strings.TrimSpace(uuid)
	if !ok || !strings.HasPrefix(uuid, "GPU-") || len(pci) > 16 {
		return
	}
	if p.uuids == nil {
		p.uuids = map[string]string{}
	}
	if len(p.uuids) < 256 {
		p.uuids[strings.Clone(pci)] = strings.Clone(clip(uuid, 64))
	}
}

// gspRateLimited marks the Xid findings of a GPU whose GSP errors the driver
// started rate-limiting: "The GPU likely needs to be reset."
func (p *parser) gspRateLimited(t string) {
	rest, _ := after(t, "for GPU at PCI:")
	pci, _, _ := strings.Cut(rest, " ")
	for i := len(p.out) - 1; i >= 0 && i >= len(p.out)-64; i-- {
		if f := &p.out[i]; f.Xid != 0 && f.Details["pci"] == pci {
			f.Details["gsp_rate_limited"] = true
			return
		}
	}
}

// rmInitFailed reports "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x62:0x40:2404)":
// the driver could not bring the GPU up.
func (p *parser) rmInitFailed(r *rec) {
	f := newFinding(r, evidence.GPUHardwareError, "rm_init_adapter_failed", "nvidia")
	if rest, ok := after(r.text, "NVRM: GPU "); ok {
		f.GPU = normBDF(strings.TrimSuffix(strings.Fields(rest + " ")[0], ":"))
	}
	if code, ok := after(r.text, "failed! ("); ok {
		f.Details["code"], _, _ = strings.Cut(code, ")")
	}
	p.flushBlock()
	p.emit(f, "rminit|"+f.GPU)
}

// fallenOff reports a "fallen off the bus" message that came without an Xid
// (newer drivers print it alone, single-line or wrapped over several lines;
// /dev/kmsg keeps the wrap as \x0a). NVIDIA treats it as Xid 79.
func (p *parser) fallenOff(r *rec, t string) {
	f := newFinding(r, evidence.GPUHardwareError, "fallen_off_bus", "nvidia")
	if strings.Contains(t, `\x0a`) {
		t = strings.ReplaceAll(strings.ReplaceAll(t, `\x0aNVRM: `, " "), `\x0a`, " ")
		f.Text = clip(strings.TrimSpace(t), maxTextBytes)
	}
	fallenOffDetails(&f, t)
	p.flushBlock()
	p.emit(f, "fob|"+f.GPU)
}

func fallenOffDetails(f *evidence.Finding, t string) {
	f.Xid = 79
	f.Details["xid_from_text"] = true // no Xid token; the message is Xid 79's
	if info, ok := XidInfo(79); ok {
		f.Details["category"], f.Details["action"] = info.Category, info.Action
	}
	for _, m := range []string{"NVIDIA GPU ", "GPU at PCI:", "GPU "} {
		if w, ok := wordAfter(t, m); ok {
			if g := normBDF(strings.TrimSuffix(w, ":")); isBDF(g) {
				f.GPU = g
				break
			}
		}
	}
	if id, ok := wordAfter(t, "PCI ID: "); ok {
		f.Details["pci_id"] = strings.TrimSuffix(id, ")")
	}
}

// openWrapped starts collecting "NVRM: The NVIDIA GPU 0000:b3:00.0" and the
// indented lines after it; only if they say "fallen off the bus" is it
// evidence (the same opening is used for unsupported-GPU notices).
func (p *parser) openWrapped(r *rec) {
	b := &block{f: newFinding(r, evidence.GPUHardwareError, "fallen_off_bus", "nvidia")}
	b.f.Text = clip(strings.TrimSpace(r.text[strings.Index(r.text, "NVRM: "):]), maxTextBytes)
	b.drop = true
	b.absorb = func(_ *parser, b *block, r *rec) bool {
		if !r.cont || r.n > b.f.Line+4 || !strings.Contains(r.text, "NVRM:") {
			return false
		}
		more, _ := after(r.text, "NVRM:")
		b.f.Text = clip(b.f.Text+" "+strings.TrimSpace(more), maxTextBytes)
		if strings.Contains(b.f.Text, "fallen off the bus") {
			b.drop = false
			fallenOffDetails(&b.f, b.f.Text)
		}
		return true
	}
	b.key = func(b *block) string { return "fob|" + b.f.GPU }
	p.open(b)
}
