package kernlog

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// The kernel reports a userspace process killed by a CPU exception as:
//
//	python2[4598]: segfault at da84cf8 ip 00007f7b2cbac94d sp 00007ffe4e250b60 error 4 in libc-2.27.so[7f7b2cb15000+1e7000]
//	traps: pcm-sensor-serv[8542] general protection fault ip:7f638b3f9967 sp:7ffe5e7434b0 error:0 in libc-2.32.so[7f638b3f9000+14f000]
//	traps: conky[3786] general protection ip:30e2c4ecc0 sp:7fff40b4a120 error:0 in libc-2.23.so[30e2c00000+1c0000]   (kernels before 4.20)
//	traps: adaptivemmd[3239587] trap divide error ip:57d6038f7046 sp:7ffc4d461910 error:0 in adaptivemmd[57d6038f2000+6000]
//	python3[1234]: unhandled level 3 translation fault (11) at 0x0000000000000008, esr 0x92000006, in libc.so.6[ffff8c...+...]   (arm64)
//
// All numbers are hex. Newer kernels add the offset inside the mapping
// ("in libc.so.6[1a2b3,7f..+1e7000]") and "likely on CPU 3 (core 3, socket 0)".
// A "Code: ..." line with the instruction bytes may follow.

func (p *parser) trap(r *rec) bool {
	t := r.text
	switch {
	case strings.Contains(t, "]: segfault at "):
		return p.segfault(r)
	case strings.Contains(t, "traps: "):
		return p.cpuTrap(r)
	case strings.Contains(t, "]: unhandled ") && strings.Contains(t, " fault"):
		return p.unhandled(r)
	}
	return false
}

func (p *parser) segfault(r *rec) bool {
	t := r.text
	i := strings.Index(t, "]: segfault at ")
	comm, pid, ok := commPid(t[:i+1])
	if !ok {
		return false
	}
	f := newFinding(r, evidence.NativeCrash, "segfault", "")
	f.Pid = int(pid)
	d := f.Details
	d.SetText(detail.Process, comm)
	rest := t[i+len("]: segfault at "):]
	addr, rest := leadingHex(rest)
	f.Address = hexAddr(addr)
	if ip, ok := hexAfter(rest, " ip "); ok {
		d["ip"] = ip
	}
	if sp, ok := hexAfter(rest, " sp "); ok {
		d["sp"] = sp
	}
	if e, ok := hexAfter(rest, " error "); ok {
		d["error"] = e
		d["error_decoded"] = decodePFError(e)
	}
	mapping(d, rest)
	p.openCrash(f)
	return true
}

// cpuTrap reads the "traps: comm[pid] <what> ip:X sp:Y error:Z in obj[...]" family.
func (p *parser) cpuTrap(r *rec) bool {
	t := r.text
	rest, _ := after(t, "traps: ")
	head, tail, ok := strings.Cut(rest, "] ")
	if !ok {
		return false
	}
	comm, pid, ok := commPid(head + "]")
	if !ok {
		return false
	}
	what, regs, ok := strings.Cut(tail, " ip:")
	if !ok {
		return false
	}
	f := newFinding(r, evidence.NativeCrash, "trap", "")
	d := f.Details
	switch {
	case strings.HasPrefix(what, "general protection"):
		f.Details["event"] = "general_protection"
	case strings.HasPrefix(what, "trap "):
		d["trap"] = strings.TrimPrefix(what, "trap ")
	default:
		d["trap"] = what // "int3", "invalid opcode" on some kernels
	}
	f.Pid = int(pid)
	d.SetText(detail.Process, comm)
	regs = " ip:" + regs
	for _, k := range []string{"ip", "sp", "error"} {
		if v, ok := hexAfter(regs, " "+k+":"); ok {
			d[k] = v
		}
	}
	mapping(d, regs)
	p.openCrash(f)
	return true
}

// unhandled reads arm64's "comm[pid]: unhandled level 3 translation fault (11) at 0x..., esr 0x..., in obj[...]".
func (p *parser) unhandled(r *rec) bool {
	t := r.text
	i := strings.Index(t, "]: unhandled ")
	comm, pid, ok := commPid(t[:i+1])
	if !ok {
		return false
	}
	f := newFinding(r, evidence.NativeCrash, "unhandled_fault", "")
	f.Pid = int(pid)
	d := f.Details
	d.SetText(detail.Process, comm)
	rest := t[i+len("]: unhandled "):]
	what, _, _ := strings.Cut(rest, " at ")
	d["fault"] = what
	if sig, ok := intAfter(what, "("); ok {
		d["signal"] = sig
	}
	if a, ok := hexAfter(rest, " at "); ok {
		f.Address = hexAddr(a)
	}
	if esr, ok := hexAfter(rest, "esr "); ok {
		d["esr"] = esr
	}
	mapping(d, rest)
	p.openCrash(f)
	return true
}

// mapping reads " in libc-2.27.so[7f7b2cb15000+1e7000]" (optionally
// "[offset,base+size]") and " likely on CPU 3".
func mapping(d map[string]any, s string) {
	in := strings.LastIndex(s, " in ")
	if in < 0 {
		return
	}
	obj := s[in+len(" in "):]
	lb := strings.IndexByte(obj, '[')
	if lb <= 0 {
		return
	}
	d["object"] = obj[:lb]
	inner, _, ok := strings.Cut(obj[lb+1:], "]")
	if !ok {
		return
	}
	if _, rest, found := strings.Cut(inner, ","); found {
		inner = rest
	}
	if base, size, found := strings.Cut(inner, "+"); found {
		d["base"], d["size"] = base, size
		if ip, ok := d["ip"].(string); ok {
			if off, ok := hexSub(ip, base); ok {
				d["offset"] = off
			}
		}
	}
	if cpu, ok := intAfter(s, "likely on CPU "); ok {
		d["cpu"] = cpu
	}
}

// hexSub returns a-b as hex, the faulting instruction's offset inside the
// object, which is what addr2line wants.
func hexSub(a, b string) (string, bool) {
	x, err1 := strconv.ParseUint(a, 16, 64)
	y, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil || y > x {
		return "", false
	}
	return "0x" + strconv.FormatUint(x-y, 16), true
}

// decodePFError spells out the x86 page-fault error code.
func decodePFError(hex string) string {
	e, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return ""
	}
	mode := "kernel-mode"
	if e&4 != 0 {
		mode = "user-mode"
	}
	access := "read"
	switch {
	case e&16 != 0:
		access = "instruction fetch"
	case e&2 != 0:
		access = "write"
	}
	cause := "page not present"
	if e&1 != 0 {
		cause = "protection violation"
	}
	s := mode + " " + access + ", " + cause
	if e&8 != 0 {
		s += ", reserved bit set"
	}
	if e&32 != 0 {
		s += ", protection key"
	}
	return s
}

// openCrash keeps a crash finding open for the "Code:" line that follows it.
func (p *parser) openCrash(f evidence.Finding) {
	absorb := func(_ *parser, b *block, r *rec) bool {
		code, ok := after(r.text, "Code: ")
		if !ok || r.n > b.f.Line+2 {
			return false
		}
		b.f.Details.SetText(detail.Code, clip(strings.TrimSpace(code), 256))
		return true
	}
	key := func(b *block) string {
		return fmt.Sprintf("crash|%v|%d|%v|%v", b.f.Details["event"], b.f.Pid, b.f.Details["process"], b.f.Details["ip"])
	}
	p.open(&block{f: f, absorb: absorb, key: key})
}
