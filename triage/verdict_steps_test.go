package triage

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
)

func stepsOf(in Input) string { return strings.Join(Decide(in).NextSteps, "\n") }

func logFinding(kind evidence.Kind, text string, d map[string]any) evidence.Finding {
	if d == nil {
		d = map[string]any{}
	}
	return evidence.Finding{Kind: kind, Source: evidence.SourceLog, File: "output.log", Line: 5, Text: text, Details: d}
}

func TestNextStepsVendor(t *testing.T) {
	cudaIMA := logFinding(evidence.GPUIllegalMemoryAccess, "RuntimeError: CUDA error: an illegal memory access was encountered", map[string]any{"runtime": "CUDA"})
	hipIMA := logFinding(evidence.GPUIllegalMemoryAccess, "RuntimeError: HIP error: an illegal memory access was encountered", map[string]any{"runtime": "HIP"})
	bare := logFinding(evidence.GPUIllegalMemoryAccess, "Error: an illegal memory access was encountered /x/device_memory.cu:121", nil)
	for _, c := range []struct {
		name       string
		in         Input
		want, nope []string
	}{
		{"CUDA wording", Input{Findings: []evidence.Finding{cudaIMA}}, []string{"pystacks,cuda-sync", "CUDA_LAUNCH_BLOCKING=1"}, []string{"rocm-sync", "AMD_SERIALIZE_KERNEL"}},
		{"HIP wording", Input{Findings: []evidence.Finding{hipIMA}}, []string{"pystacks,rocm-sync"}, []string{"cuda-sync", "sglang"}},
		{"wording beats the host", Input{Findings: []evidence.Finding{cudaIMA}, HostVendor: "amd"}, []string{"cuda-sync"}, []string{"rocm-sync"}},
		{"host decides when the wording does not", Input{Findings: []evidence.Finding{bare}, HostVendor: "nvidia"}, []string{"cuda-sync"}, []string{"rocm-sync", "AMD_SERIALIZE"}},
		{"both when nothing tells", Input{Findings: []evidence.Finding{bare}}, []string{"rocm-sync", "cuda-sync"}, nil},
	} {
		got := stepsOf(c.in)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: steps lack %q:\n%s", c.name, w, got)
			}
		}
		for _, w := range c.nope {
			if strings.Contains(got, w) {
				t.Errorf("%s: steps hold %q:\n%s", c.name, w, got)
			}
		}
	}
}

func TestNextStepsNeverTheRunThatHappened(t *testing.T) {
	for _, in := range []Input{
		{ExitCode: vdInt(1), Command: []string{"bash", "run.sh"}, Run: &RunSetup{Profiles: []string{"sglang"}, Level: 3}},
		{Signal: "SIGSEGV", Command: []string{"python3", "x.py"}, Run: &RunSetup{Profiles: []string{"sglang", "coredump"}, Level: 3}},
		{Findings: []evidence.Finding{logFinding(evidence.GPUIllegalMemoryAccess, "CUDA error: an illegal memory access was encountered", map[string]any{"runtime": "CUDA"})},
			Command: []string{"python3", "x.py"}, Run: &RunSetup{Profiles: []string{"sglang", "cuda-sync"}, Level: 5}},
	} {
		r := Decide(in)
		this := "kcrash run --profile " + strings.Join(in.Run.Profiles, ",")
		same := []string{fmt.Sprintf("`%s --level %d -- %s`", this, in.Run.Level, shellJoin(in.Command))}
		if in.Run.Level == 3 {
			same = append(same, fmt.Sprintf("`%s -- %s`", this, shellJoin(in.Command)))
		}
		for _, s := range r.NextSteps {
			for _, p := range same {
				if strings.Contains(s, p) {
					t.Errorf("%s: next step repeats the run (%s): %s", r.Verdict.Kind, p, s)
				}
			}
		}
		if len(r.NextSteps) == 0 {
			t.Errorf("%s: no next steps left", r.Verdict.Kind)
		}
	}
}

func TestNextStepsGraphFlagsOnlyOnServerLaunch(t *testing.T) {
	ima := []evidence.Finding{logFinding(evidence.GPUIllegalMemoryAccess, "CUDA error: an illegal memory access was encountered", map[string]any{"runtime": "CUDA"})}
	for _, c := range []struct {
		argv       []string
		want, nope string
	}{
		{[]string{"python3", "x.py"}, "SGLang `--disable-cuda-graph", "x.py --disable-cuda-graph"},
		{[]string{"bash", "run_qwen.sh"}, "in run_qwen.sh", "run_qwen.sh --disable-cuda-graph"},
		{[]string{"python3", "-m", "sglang.launch_server", "--tp", "8"}, "--tp 8 --disable-cuda-graph --disable-prefill-cuda-graph`", "add `--disable"},
		{[]string{"vllm", "serve", "m"}, "serve m --enforce-eager`", "--disable-cuda-graph"},
	} {
		got := stepsOf(Input{Findings: ima, Command: c.argv})
		if !strings.Contains(got, c.want) || strings.Contains(got, c.nope) {
			t.Errorf("%v: want %q, not %q:\n%s", c.argv, c.want, c.nope, got)
		}
	}
}

func TestNextStepsCoreLimitAndPySpy(t *testing.T) {
	got := stepsOf(Input{Signal: "SIGSEGV", Command: []string{"python3", "x.py"}, Run: &RunSetup{Profiles: []string{"sglang", "coredump"}, Level: 3, CoreLimitZero: true}})
	if !strings.Contains(got, "ulimit -c 0") || !strings.Contains(got, "ulimit -c unlimited") {
		t.Errorf("core limit not mentioned:\n%s", got)
	}
	got = stepsOf(Input{HangDetected: true, Command: []string{"python3", "x.py"}, Run: &RunSetup{Profiles: []string{"sglang"}, Level: 3, Pids: []int{4242, 4250}}})
	if !strings.Contains(got, "py-spy dump --pid 4242") || !strings.Contains(got, "py-spy dump --pid 4250") || strings.Contains(got, "--pid PID") || !strings.Contains(got, "raw/stacks.txt") {
		t.Errorf("py-spy step without the real pids:\n%s", got)
	}
}

// TestCleanExitWithNaNLossIsAFinding: a training run that exits 0 after its
// loss went NaN did not succeed; the verdict says so instead of "clean".
func TestCleanExitWithNaNLossIsAFinding(t *testing.T) {
	s := loadUnseen(t, "heldout2")
	var text string
	for _, x := range s {
		if x.name == "loss-nan-epoch-log-gradnorm-tf.txt" {
			text = x.text
		}
	}
	fs, err := ScanLog(strings.NewReader(text), "output.log")
	if err != nil {
		t.Fatal(err)
	}
	r := Decide(Input{ExitCode: vdInt(0), Findings: fs})
	if r.Verdict.Kind != evidence.CleanExit || r.Verdict.Confidence != Low || !strings.Contains(r.Verdict.Summary, "non-finite values: epoch: 3451 loss: nan (line 3)") {
		t.Errorf("verdict %+v", r.Verdict)
	}
	md := Summary(r, SummaryMeta{})
	if !strings.Contains(md, "numerical_nonfinite") {
		t.Errorf("the NaN loss is not in the summary's evidence:\n%s", md)
	}
	if len(r.NextSteps) == 0 || !strings.Contains(strings.Join(r.NextSteps, "\n"), "set_detect_anomaly") {
		t.Errorf("no next step for the NaN loss: %q", r.NextSteps)
	}
}

func TestDataLoaderShmBusErrorReadsAsSharedMemory(t *testing.T) {
	s := loadUnseen(t, "heldout2")
	for _, x := range s {
		if x.name != "dataloader-bus-error-stcn.txt" {
			continue
		}
		fs, _ := ScanLog(strings.NewReader(x.text), "output.log")
		r := Decide(Input{ExitCode: vdInt(1), Findings: fs})
		steps := strings.Join(r.NextSteps, "\n")
		if r.Verdict.Kind != evidence.HostOOM || !strings.Contains(r.Verdict.Summary, "/dev/shm") || !strings.Contains(steps, "--shm-size") || strings.Contains(steps, "OOM killer") {
			t.Errorf("verdict %+v, steps:\n%s", r.Verdict, steps)
		}
		return
	}
	t.Fatal("sample missing")
}

// TestXid45NamesItsNVLinkCause: an NVLink Xid then the Xid 45 it caused is the
// NVLink failure; an Xid 45 alone that names its cause ("caused by previous
// Xid 149") stands for that cause.
func TestXid45NamesItsNVLinkCause(t *testing.T) {
	xid149 := "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n"
	xid45 := "kernel: NVRM: Xid (PCI:0019:01:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n"
	for _, c := range []struct {
		name, text string
		rootXid    int
	}{
		{"both", xid149 + xid45, 149},
		{"45 alone", xid45, 45},
	} {
		fs, err := ScanEvidenceText(strings.NewReader(c.text), "dmesg.txt", 2025)
		if err != nil {
			t.Fatal(err)
		}
		r := Decide(Input{Findings: fs})
		if r.Verdict.Kind != evidence.GPUHardwareError || !strings.Contains(r.Verdict.Summary, "Xid 149") {
			t.Errorf("%s: verdict %+v", c.name, r.Verdict)
		}
		for _, f := range r.Findings {
			role := f.Details["verdict_role"]
			if f.Xid == c.rootXid && role != RoleRootCause {
				t.Errorf("%s: Xid %d is %v, want root_cause", c.name, f.Xid, role)
			}
			if c.rootXid == 149 && f.Xid == 45 && role != RoleExplained {
				t.Errorf("%s: Xid 45 is %v, want explained", c.name, role)
			}
		}
	}
}

// TestNextStepsHangPythonStacks: a hang's steps say whether kcrash's
// faulthandler hook gave the Python stacks, and name their file.
func TestNextStepsHangPythonStacks(t *testing.T) {
	for _, c := range []struct {
		name       string
		run        *RunSetup
		want, nope string
	}{
		{"taken", &RunSetup{Profiles: []string{"sglang"}, Level: 3, PyStacksHook: true, PyStacks: 2}, "Python stacks of every thread of 2 Python processes, taken by faulthandler when kcrash declared the hang, are in raw/pystacks.txt", "No Python stacks"},
		{"hook without takers", &RunSetup{Profiles: []string{"sglang"}, Level: 3, PyStacksHook: true}, "No Python stacks were obtained", "are in raw/pystacks.txt"},
		{"no hook", &RunSetup{Profiles: []string{"nccl"}, Level: 3}, "add the `pystacks` profile", "raw/pystacks.txt"},
	} {
		got := stepsOf(Input{HangDetected: true, Command: []string{"python3", "x.py"}, Run: c.run})
		if !strings.Contains(got, c.want) || strings.Contains(got, c.nope) || !strings.Contains(got, "raw/stacks.txt") {
			t.Errorf("%s: want %q, not %q:\n%s", c.name, c.want, c.nope, got)
		}
	}
}
