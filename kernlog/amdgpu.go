package kernlog

import (
	"fmt"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// amdgpu reports a GPU page fault as a block:
//
//	amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)
//	amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12924)
//	amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)
//	amdgpu 0000:c6:00.0: amdgpu:   cookie node_id 0 fault from die AID0          (MI300)
//	amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031
//	amdgpu 0000:c6:00.0: amdgpu: 	 Faulty UTCL2 client ID: TCP (0x8)
//	amdgpu 0000:c6:00.0: amdgpu: 	 MORE_FAULTS: 0x1                            (and WALKER_ERROR, PERMISSION_FAULTS, MAPPING_ERROR, RW)
//
// Kernels differ in the details: older ones put the process on the header
// line ("pasid:32768, for process ipython3 pid 846049 thread ..."), gfx11+
// writes "Process python3 pid 15615 thread python3 pid 15615" and
// "from client 10", and GCVM_ replaces VM_ in the status register name.

func (p *parser) amdgpu(r *rec) bool {
	t := r.text
	switch {
	case strings.Contains(t, "page fault (src_id:"):
		p.openVMFault(r)
	case strings.Contains(t, "GPU fault detected:"):
		p.openLegacyVMFault(r)
	case ringTimeout(t) != "":
		p.openRingTimeout(r)
	case strings.Contains(t, "GPU reset begin"):
		p.openReset(r)
	case strings.Contains(t, "uncorrectable hardware error"):
		p.rasError(r)
	case strings.Contains(t, "in page starting at address ") && amdDevice(t) != "":
		p.openOrphanVMFault(r)
	default:
		return false
	}
	return true
}

// amdEvent reports whether t starts a report of its own, so that a block
// does not swallow the next fault or reset.
func amdEvent(t string) bool {
	return strings.Contains(t, "page fault (src_id:") || strings.Contains(t, "GPU fault detected:") ||
		ringTimeout(t) != "" || strings.Contains(t, "GPU reset begin") ||
		strings.Contains(t, "uncorrectable hardware error")
}

// amdDevice returns the PCI address of "amdgpu 0000:0e:00.0: ..." lines.
func amdDevice(t string) string {
	g, _ := bdfAfter(t, "amdgpu ")
	return g
}

func (p *parser) openVMFault(r *rec) {
	t := r.text
	f := newFinding(r, evidence.GPUPageFault, "vm_fault", "amd")
	f.GPU = amdDevice(t)
	d := f.Details
	head, _, _ := strings.Cut(t, "page fault (src_id:")
	if lb := strings.LastIndexByte(head, '['); lb >= 0 {
		if hub, kind, ok := strings.Cut(head[lb+1:], "]"); ok {
			d["hub"] = hub
			switch w := strings.TrimSpace(kind); w {
			case "no-retry":
				d["retry"] = "no"
			case "retry":
				d["retry"] = "yes"
			case "":
			default:
				d["fault_kind"] = w // "VMC", "UTCL2" on older kernels
			}
		}
	}
	params, _ := after(t, "page fault (")
	for _, k := range []string{"src_id", "ring", "vmid", "pasid"} {
		if v, ok := intAfter(params, k+":"); ok {
			d[k] = v
		}
	}
	if _, ok := after(params, "for process "); ok {
		processThread(&f, params)
	}
	b := &block{f: f, absorb: absorbVMFault, key: vmFaultKey}
	p.open(b)
}

// openOrphanVMFault starts a fault block at its address line when the header
// line is not there to start it: with several GPUs faulting at once (expert
// parallelism) their blocks interleave line by line, each GPU's line closes
// the other's block, and a paste or a grep often starts mid-block. The
// address line alone is unambiguous: the GPU took a page fault.
func (p *parser) openOrphanVMFault(r *rec) {
	f := newFinding(r, evidence.GPUPageFault, "vm_fault", "amd")
	f.GPU = amdDevice(r.text)
	f.Details["header_missing"] = true
	b := &block{f: f, absorb: absorbVMFault, key: vmFaultKey}
	absorbVMFault(p, b, r)
	p.open(b)
}

func vmFaultKey(b *block) string {
	d := b.f.Details
	return fmt.Sprintf("amdvm|%s|%v|%v|%v|%v|%d", b.f.GPU, d["hub"], d["retry"], d["vmid"], d["pasid"], b.f.Pid)
}

// absorbVMFault takes the continuation lines of a fault block.
func absorbVMFault(_ *parser, b *block, r *rec) bool {
	t := r.text
	if !strings.Contains(t, "amdgpu") || amdEvent(t) {
		return false
	}
	if g := amdDevice(t); g != "" && b.f.GPU != "" && g != b.f.GPU {
		return false
	}
	f := &b.f
	d := f.Details
	body := t
	if i := strings.LastIndex(t, "amdgpu:"); i >= 0 {
		body = t[i+len("amdgpu:"):]
	}
	body = strings.TrimSpace(body)
	switch {
	case strings.Contains(body, " pid ") && strings.Contains(body, "rocess "):
		if f.Pid == 0 {
			processThread(f, body)
		}
	case strings.HasPrefix(body, "in page starting at address "):
		a, rest := leadingHex(body[len("in page starting at address "):])
		if f.Address == "" {
			f.Address = hexAddr(a)
		}
		faultClient(d, rest)
	case strings.HasPrefix(body, "cookie node_id "):
		if v, ok := intAfter(body, "node_id "); ok {
			d["node_id"] = v
		}
		if die, ok := wordAfter(body, "from die "); ok {
			d["die"] = die
		}
	case strings.Contains(body, "PROTECTION_FAULT_STATUS:"):
		reg, val, _ := strings.Cut(body, ":")
		d["status_register"] = reg
		d["status"], _ = leadingHex(strings.TrimSpace(val))
	case strings.HasPrefix(body, "Faulty UTCL2 client ID: "):
		rest := body[len("Faulty UTCL2 client ID: "):]
		name, id, _ := strings.Cut(rest, " (")
		d.SetText(detail.UTCL2Client, name)
		d["utcl2_client_id"] = strings.TrimSuffix(id, ")")
	default:
		k, v, ok := registerField(body)
		if !ok {
			return false
		}
		d[k] = v
	}
	return true
}

// faultClient reads "from client 10" / "from IH client 0x1b (UTCL2)".
func faultClient(d map[string]any, s string) {
	c, ok := after(s, "client ")
	if !ok {
		return
	}
	id, rest := leadingHex(c)
	if id != "" {
		d["client_id"] = id
	}
	if name, ok := after(rest, "("); ok {
		d["client"], _, _ = strings.Cut(name, ")")
	}
}

// registerField reads "WALKER_ERROR: 0x5" into ("walker_error", "0x5").
func registerField(s string) (key, val string, ok bool) {
	k, v, found := strings.Cut(s, ": ")
	if !found || k == "" || len(k) > 40 {
		return "", "", false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !isUpper(c) && !isDigit(c) && c != '_' {
			return "", "", false
		}
	}
	v, rest := leadingHex(strings.TrimSpace(v))
	if v == "" || rest != "" {
		return "", "", false
	}
	return strings.ToLower(k), v, true
}

// processThread reads "process NAME pid N thread NAME pid N" (either case of
// "process"); names may be empty ("process  pid 0 thread  pid 0" when the
// kernel itself submitted the job).
func processThread(f *evidence.Finding, s string) {
	// "Process information: process blender pid ..." names the process in
	// the last "process " before the first " pid ".
	firstPid := strings.Index(s, " pid ")
	if firstPid < 0 {
		return
	}
	i := strings.LastIndex(s[:firstPid+1], "rocess ")
	if i < 0 {
		return
	}
	name := ""
	if start := i + len("rocess "); start < firstPid {
		name = s[start:firstPid]
	}
	pid, rest, ok := leadingInt(s[firstPid+len(" pid "):])
	if !ok {
		return
	}
	f.Pid = int(pid)
	f.Details.SetText(detail.Process, strings.TrimSpace(name))
	if th, ok := after(rest, " thread "); ok {
		name, tail, found := strings.Cut(th, " pid ")
		if !found {
			return
		}
		f.Details["thread"] = strings.TrimSpace(name)
		if tid, _, ok := leadingInt(tail); ok {
			f.Details["tid"] = tid
		}
	}
}

// openLegacyVMFault handles the GMC v6-v8 report:
//
//	amdgpu 0000:01:00.0: GPU fault detected: 146 0x0c80440c for process X pid N thread X pid N
//	amdgpu 0000:01:00.0:   VM_CONTEXT1_PROTECTION_FAULT_ADDR   0x00001234
//	amdgpu 0000:01:00.0:   VM_CONTEXT1_PROTECTION_FAULT_STATUS 0x0C04400C
//	amdgpu 0000:01:00.0: VM fault (0x0c, vmid 6, pasid 32768) at page 4660, read from 'TC0' (0x54433000) (68)
func (p *parser) openLegacyVMFault(r *rec) {
	t := r.text
	f := newFinding(r, evidence.GPUPageFault, "vm_fault", "amd")
	f.GPU = amdDevice(t)
	if rest, ok := after(t, "GPU fault detected: "); ok {
		if w := strings.Fields(rest); len(w) >= 2 {
			f.Details["src_id"], f.Details["status"] = w[0], w[1]
		}
	}
	processThread(&f, t)
	absorb := func(_ *parser, b *block, r *rec) bool {
		t := r.text
		if !strings.Contains(t, "amdgpu") || amdEvent(t) {
			return false
		}
		d := b.f.Details
		switch {
		case strings.Contains(t, "PROTECTION_FAULT_ADDR"):
			d["fault_addr_register"], _ = hexAfter(t, "_ADDR ")
		case strings.Contains(t, "PROTECTION_FAULT_STATUS"):
			d["status_register_value"], _ = hexAfter(t, "_STATUS ")
		case strings.Contains(t, "VM fault ("):
			if v, ok := intAfter(t, "vmid "); ok {
				d["vmid"] = v
			}
			if v, ok := intAfter(t, "pasid "); ok {
				d["pasid"] = v
			}
			if pg, ok := intAfter(t, " at page "); ok && pg >= 0 && pg < 1<<52 {
				b.f.Address = fmt.Sprintf("0x%x", pg<<12)
			}
			if c, ok := after(t, " from '"); ok {
				d["client"], _, _ = strings.Cut(c, "'")
			}
		default:
			return false
		}
		return true
	}
	p.open(&block{f: f, absorb: absorb, key: vmFaultKey})
}

// ringTimeout returns the ring named by "ring gfx_0.0.0 timeout, signaled
// seq=502589, emitted seq=502591", or "".
func ringTimeout(t string) string {
	i := strings.Index(t, " timeout")
	if i < 0 {
		return ""
	}
	j := strings.LastIndex(t[:i], "ring ")
	if j < 0 {
		return ""
	}
	name := t[j+len("ring ") : i]
	if name == "" || strings.ContainsAny(name, " \t") {
		return ""
	}
	return name
}

// openRingTimeout reports a job that did not finish on a GPU ring; the next
// line names the process that submitted it.
func (p *parser) openRingTimeout(r *rec) {
	t := r.text
	f := newFinding(r, evidence.GPUHang, "ring_timeout", "amd")
	f.GPU = amdDevice(t)
	f.Details["ring"] = ringTimeout(t)
	if v, ok := intAfter(t, "signaled seq="); ok {
		f.Details["signaled_seq"] = v
	}
	if v, ok := intAfter(t, "emitted seq="); ok {
		f.Details["emitted_seq"] = v
	}
	absorb := func(_ *parser, b *block, r *rec) bool {
		t := r.text
		if r.n > b.f.Line+3 || amdEvent(t) || !strings.Contains(t, "rocess") || !strings.Contains(t, " pid ") {
			return false
		}
		processThread(&b.f, t)
		return true
	}
	key := func(b *block) string {
		return fmt.Sprintf("ring|%s|%v|%d", b.f.GPU, b.f.Details["ring"], b.f.Pid)
	}
	p.open(&block{f: f, absorb: absorb, key: key})
}

// openReset reports "amdgpu 0000:0c:00.0: amdgpu: GPU reset begin!" and
// collects what the driver says while resetting: failed suspends, MES and
// ring test failures, whether VRAM was lost and how the reset ended.
func (p *parser) openReset(r *rec) {
	t := r.text
	f := newFinding(r, evidence.GPUHang, "gpu_reset", "amd")
	f.GPU = amdDevice(t)
	// The ring timeout that triggered the reset names no device on older
	// kernels; the reset right after it does.
	if b := p.blk; b != nil && b.f.Details["event"] == "ring_timeout" && b.f.GPU == "" && r.n-b.last <= 3 {
		b.f.GPU = f.GPU
	}
	absorb := func(_ *parser, b *block, r *rec) bool {
		t := r.text
		if r.n > b.f.Line+64 || amdEvent(t) || !strings.Contains(t, "amdgpu") {
			return false
		}
		d := b.f.Details
		switch {
		case strings.Contains(t, "VRAM is lost"):
			d["vram_lost"] = true
		case strings.Contains(t, "reset succeeded") || strings.Contains(t, ") succeeded"):
			d["reset_result"] = "succeeded"
		case strings.Contains(t, "GPU reset end with ret = "):
			if v, ok := intAfter(t, "ret = "); ok && v != 0 {
				d["reset_result"] = "failed"
			}
		case strings.Contains(t, "Failed to suspend process "):
			if v, ok := hexAfter(t, "process "); ok {
				d["failed_suspend_pasid"] = v
			}
		}
		if strings.Contains(t, "*ERROR*") || strings.Contains(t, "failed") || strings.Contains(t, "Failed") ||
			strings.Contains(t, "unrecoverable") {
			appendDistinct(d, "followups", clip(strings.TrimSpace(t), 240), 8)
		}
		return true
	}
	key := func(b *block) string { return "reset|" + b.f.GPU }
	p.open(&block{f: f, absorb: absorb, key: key})
}

// rasError reports "amdgpu 0000:03:00.0: amdgpu: 1 uncorrectable hardware
// errors detected in umc block".
func (p *parser) rasError(r *rec) {
	t := r.text
	f := newFinding(r, evidence.GPUHardwareError, "ras_error", "amd")
	f.GPU = amdDevice(t)
	body := t
	if i := strings.LastIndex(t, "amdgpu:"); i >= 0 {
		body = strings.TrimSpace(t[i+len("amdgpu:"):])
	}
	if n, _, ok := leadingInt(body); ok {
		f.Details["count"] = n
	}
	if blk, ok := wordAfter(t, "detected in "); ok {
		f.Details["block"] = blk
	}
	p.flushBlock()
	p.emit(f, "ras|"+f.GPU+"|"+fmt.Sprint(f.Details["block"]))
}
