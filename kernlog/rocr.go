package kernlog

import (
	"strconv"
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// The ROCm runtime (ROCr, and HIP's rocdevice.cpp on top of it) reports GPU
// faults in the program's own output, not the kernel log. They are parsed
// here because they are the userspace half of an amdgpu VM fault, and are
// marked Source "log" because that is where they are printed.

// rocr reads "Memory access fault by GPU node-3 (Agent handle: 0x5a5c587a51c0)
// on address 0x709843600000. Reason: Write access to a read-only page." and
// "HW Exception by GPU node-1 (Agent handle: 0x...) reason :GPU Hang". The
// message may sit in the middle of a progress bar, so it is cut out of the
// line rather than taken whole.
func (p *parser) rocr(r *rec) bool {
	t := r.text
	switch {
	case strings.Contains(t, "Memory access fault by GPU node-"):
		p.memoryAccessFault(r, t[strings.Index(t, "Memory access fault by GPU node-"):])
	case strings.Contains(t, "HW Exception by GPU node-"):
		p.hwException(r, t[strings.Index(t, "HW Exception by GPU node-"):])
	default:
		return false
	}
	return true
}

func (p *parser) memoryAccessFault(r *rec, m string) {
	f := newFinding(r, evidence.GPUPageFault, "memory_access_fault", "amd")
	f.Source = evidence.SourceLog
	rocrNode(&f, m)
	if a, ok := hexAfter(m, " on address "); ok {
		f.Address = hexAddr(a)
	}
	end := len(m)
	if reason, ok := after(m, "Reason: "); ok {
		// Every ROCr reason is one sentence ending in '.'; whatever follows
		// it on the line belongs to someone else's output.
		if dot := strings.IndexByte(reason, '.'); dot >= 0 {
			reason = reason[:dot+1]
		}
		f.Details.SetText(detail.Reason, reason)
		end = strings.Index(m, "Reason: ") + len("Reason: ") + len(reason)
	}
	f.Text = clip(m[:end], maxTextBytes)
	p.flushBlock()
	p.emit(f, "rocr|"+f.GPU+"|"+f.Address)
}

func (p *parser) hwException(r *rec, m string) {
	f := newFinding(r, evidence.GPUHang, "hw_exception", "amd")
	f.Source = evidence.SourceLog
	rocrNode(&f, m)
	if reason, ok := after(m, "reason :"); ok {
		f.Details.SetText(detail.Reason, strings.TrimSpace(reason))
		if !strings.Contains(reason, "Hang") {
			f.Kind = evidence.GPUHardwareError // ECC and other hardware exceptions
		}
	}
	f.Text = clip(m, maxTextBytes)
	p.flushBlock()
	p.emit(f, "hwexc|"+f.GPU)
}

// rocrNode reads "GPU node-3 (Agent handle: 0x...)". The node is the KFD
// topology node, not a PCI address: that is all the runtime prints.
func rocrNode(f *evidence.Finding, m string) {
	if n, ok := intAfter(m, "GPU node-"); ok {
		f.GPU = "node-" + strconv.FormatInt(n, 10)
		f.Details["node"] = n
	}
	if h, ok := hexAfter(m, "Agent handle: "); ok {
		f.Details["agent_handle"] = h
	}
}

// hsa reads HIP's queue-abort line, in its old and new shapes:
//
//	:0:rocdevice.cpp :2672: 0696142325 us: 5999 : [tid:0x7f676e4c7640] Device::callbackQueue aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted ... code: 0x29
//	:0:rocdevice.cpp :2982: 1143003422 us: [pid:3148 tid:0x7f8df4bff640] Callback: Queue 0x7f8dd4600000 aborting with error : HSA_STATUS_ERROR_MEMORY_FAULT: ... code: 0x2b
func (p *parser) hsa(r *rec) bool {
	t := r.text
	i := strings.Index(t, "HSA_STATUS_ERROR")
	status := t[i:]
	if end := strings.IndexAny(status, ": \t,'\"()"); end >= 0 {
		status = status[:end]
	}
	f := newFinding(r, hsaKind(status), "hsa_error", "amd")
	f.Source = evidence.SourceLog
	d := f.Details
	d.SetText(detail.Status, status)
	if msg, ok := after(t[i:], status+": "); ok {
		msg, _, _ = strings.Cut(msg, " code: ")
		d.SetText(detail.Message, strings.TrimSpace(msg))
	}
	if c, ok := hexAfter(t, "code: "); ok {
		d.SetText(detail.Code, c)
	}
	if tid, ok := hexAfter(t, "tid:"); ok {
		d["tid"] = tid
	}
	if q, ok := hexAfter(t, "Queue 0x"); ok {
		d["queue"] = "0x" + q
	}
	if pid, ok := intAfter(t, "[pid:"); ok {
		f.Pid = int(pid)
	} else if us, ok := after(t, " us: "); ok {
		if pid, rest, ok := leadingInt(us); ok && strings.HasPrefix(rest, " :") {
			f.Pid = int(pid) // older HIP prints the pid bare before " : [tid:"
		}
	}
	if src := hipSource(t); src != "" {
		d["source"] = src
	}
	p.flushBlock()
	p.emit(f, "hsa|"+status+"|"+strconv.Itoa(f.Pid))
	return true
}

// hsaKind maps an HSA status to the verdict it supports.
func hsaKind(status string) evidence.Kind {
	switch status {
	case "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", "HSA_STATUS_ERROR_MEMORY_FAULT":
		return evidence.GPUPageFault
	case "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION", "HSA_STATUS_ERROR_EXCEPTION":
		return evidence.GPUIllegalMemoryAccess
	case "HSA_STATUS_ERROR_OUT_OF_RESOURCES":
		return evidence.GPUOOM
	}
	return evidence.Unknown
}

// hipSource reads ":0:rocdevice.cpp            :2614:" into "rocdevice.cpp:2614";
// HIP pads the file name to a column.
func hipSource(t string) string {
	i := strings.Index(t, ".cpp")
	if i < 0 {
		return ""
	}
	start := strings.LastIndexByte(t[:i], ':') + 1
	rest := strings.TrimLeft(t[i+len(".cpp"):], " ")
	if !strings.HasPrefix(rest, ":") {
		return ""
	}
	line, _ := leadingDigits(rest[1:])
	if line == "" {
		return ""
	}
	return t[start:i] + ".cpp:" + line
}
