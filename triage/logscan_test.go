package triage

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
	"github.com/kcrash/kcrash/internal/testenv"
)

type anyMap = map[string]any

// TestScanLogCorpus runs the log scanner over every program-output sample of
// the corpus and checks kind, line and the fields INDEX.md says a parser
// should extract.
func TestScanLogCorpus(t *testing.T) {
	const p6, p2 = "6-program-log/", "2-rocm-userspace-fault/"
	threads := "[[28,0,0] [29,0,0] [30,0,0] [31,0,0] [96,0,0] [97,0,0] [98,0,0]]"
	cases := []struct {
		file string
		want []lsWant
	}{
		{p6 + "cublas-status-execution-failed-gemmex.txt", []lsWant{
			{kind: evidence.GPUIllegalMemoryAccess, line: 2, text: "CUBLAS_STATUS_EXECUTION_FAILED when calling", details: anyMap{
				"status": "CUBLAS_STATUS_EXECUTION_FAILED", "call": "cublasGemmEx", "exception": "RuntimeError", "signature": "blas-execution-failed"}},
		}},
		{p6 + "cuda-oom-capacty-typo-max_split_size_mb-variant.txt", []lsWant{
			{kind: evidence.GPUOOM, line: 1, gpu: "0", details: anyMap{
				"exception": "torch.cuda.OutOfMemoryError", "runtime": "CUDA",
				"requested": "32.00 MiB", "requested_bytes": 32 << 20,
				"total": "4.00 GiB", "total_bytes": 4 << 30,
				"free": "41.56 MiB", "free_bytes": 43578819,
				"this_process": "3.44 GiB", "allocated_by_pytorch": "2.58 GiB", "reserved_unallocated": "1.90 MiB"}},
		}},
		{p6 + "cuda-oom-torch-OutOfMemoryError-vllm-multiple-processes.txt", []lsWant{
			{kind: evidence.GPUOOM, line: 2, gpu: "0", details: anyMap{
				"exception": "torch.OutOfMemoryError", "requested": "1.71 GiB", "requested_bytes": 1836098519,
				"total": "22.30 GiB", "free": "1.52 GiB", "free_bytes": 1632087572,
				"allocated_by_pytorch": "19.55 GiB", "reserved_unallocated": "244.94 MiB"}},
		}},
		{p6 + "cuda-oom-torch-cuda-OutOfMemoryError-including-non-pytorch.txt", []lsWant{
			{kind: evidence.GPUOOM, line: 1, gpu: "0", details: anyMap{
				"exception": "torch.cuda.OutOfMemoryError", "requested": "22.00 MiB", "total": "23.65 GiB",
				"free": "11.06 MiB", "this_process": "23.60 GiB", "allocated_by_pytorch": "22.90 GiB",
				"reserved_unallocated": "194.87 MiB", "reserved_unallocated_bytes": 204336005}},
		}},
		{p6 + "device-side-assert-kernel-assertion-lines-indexkernel.txt", []lsWant{
			{kind: evidence.GPUDeviceAssert, line: 1, details: anyMap{
				"assert_file": "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu", "assert_line": 93,
				"function": "operator()", "block": "[0,0,0]", "threads": threads, "count": 7,
				"assertion": `index >= -sizes[i] && index < sizes[i] && "index out of bounds"`}},
		}},
		{p6 + "faulthandler-segfault-thread-stacks-rtx5090.txt", []lsWant{
			{kind: evidence.NativeCrash, line: 3, text: "Fatal Python error: Segmentation fault", details: anyMap{
				"signal": "SIGSEGV", "message": "Segmentation fault", "thread": "0x00007ff962067300",
				"threads_dumped": 3, "frames": nil}}, // the stored copy ends at the crashing thread's header
		}},
		{p6 + "hip-oom-mi3xx-gpu7.txt", []lsWant{
			{kind: evidence.GPUOOM, line: 10, gpu: "7", details: anyMap{
				"runtime": "HIP", "exception": "torch.OutOfMemoryError", "requested": "2.00 MiB",
				"total": "287.98 GiB", "free": "203.49 GiB", "free_bytes": 218495723766,
				"allocated_by_pytorch": "68.63 GiB", "reserved_unallocated": "14.93 GiB",
				"frame_file": "/workspace/Quark/quark/torch/quantization/observer/observer.py", "frame_line": 712, "frame_func": "forward"}},
		}},
		{p6 + "nccl-warn-cuda-failure-700-terminate-c10-error.txt", []lsWant{
			{kind: evidence.GPUIllegalMemoryAccess, line: 1, pid: 940929, gpu: "1", details: anyMap{
				"cuda_error": 700, "host": "Amphitrite", "tid": 940929, "source": "enqueue.cc:1556",
				"message": "an illegal memory access was encountered"}},
			{kind: evidence.GPUIllegalMemoryAccess, line: 7, pid: 940928, gpu: "0", details: anyMap{"cuda_error": 700}},
			{kind: evidence.NativeCrash, line: 13, details: anyMap{"exception": "c10::Error", "signal": "SIGABRT"}},
			{kind: evidence.GPUIllegalMemoryAccess, line: 14, text: "what():  CUDA error: an illegal memory access", details: anyMap{"runtime": "CUDA"}},
		}},
		{p6 + "nccl-watchdog-collective-timeout-new-format.txt", []lsWant{
			{kind: evidence.CollectiveTimeout, line: 1, details: anyMap{"rank": 1, "seq": 808, "collective": "ALLREDUCE",
				"timeout_ms": 600000, "ran_ms": 600020, "numel_in": 9801523, "numel_out": 9801523}},
			{kind: evidence.CollectiveTimeout, line: 3, details: anyMap{"rank": 0, "seq": 808, "collective": "ALLREDUCE", "timeout_ms": 600000, "ran_ms": 600030}},
			{kind: evidence.CollectiveTimeout, line: 5, details: anyMap{"rank": 2, "seq": 808, "collective": "ALLREDUCE", "timeout_ms": 600000, "ran_ms": 600061}},
		}},
		{p6 + "rccl-nccl-warn-hipify-invalid-argument.txt", []lsWant{
			{kind: evidence.CollectiveTimeout, line: 1, pid: 19402, gpu: "0", details: anyMap{
				"message": "Cuda failure 'invalid argument'", "host": "UVOSLinux", "tid": 19419,
				"source": "/usr/src/debug/rccl/build/hipify/src/transport/p2p.cc:237", "signature": "nccl-warn-failure"}},
			// The log ends on a traceback's header: a traceback cut right after it.
			{kind: evidence.PythonException, line: 13, details: anyMap{"signature": "python-traceback", "truncated": true}},
		}},
		{p6 + "sglang-device-side-assert-logits-processor.txt", []lsWant{
			{kind: evidence.GPUDeviceAssert, line: 9, details: anyMap{
				"exception": "RuntimeError", "runtime": "CUDA",
				"frame_file": "/data/redacted/py_env/sglang/lib/python3.10/site-packages/sglang/srt/layers/logits_processor.py",
				"frame_line": 268, "frame_func": "forward"}},
		}},
		{p6 + "sglang-received-sigquit-message-in-logging-error.txt", []lsWant{
			{kind: evidence.Unknown, line: 4, text: "Received sigquit from a child proces.", details: anyMap{
				"symptom": true, "framework": "sglang", "signature": "sglang-sigquit", "exception": nil}},
		}},
		{p6 + "sglang-scheduler-exception-illegal-memory-access-then-sigquit.txt", []lsWant{
			{kind: evidence.GPUIllegalMemoryAccess, line: 14, text: "RuntimeError: CUDA error: an illegal memory access", details: anyMap{
				"exception": "RuntimeError", "context": "Scheduler hit an exception", "parallel_rank": "TP0",
				"framework": "sglang", "component": "scheduler",
				"traceback_line": 1, "frame_func": "synchronize", "frame_line": 100,
				"frame_file": "/usr/local/lib/python3.10/dist-packages/torch/cuda/streams.py"}},
			{kind: evidence.Unknown, line: 19, details: anyMap{"symptom": true, "signature": "sglang-sigquit"}},
		}},
		{p6 + "triton-out-of-resource-shared-memory-raise.txt", []lsWant{
			{kind: evidence.GPUOOM, line: 6, details: anyMap{
				"exception": "triton.runtime.errors.OutOfResources", "resource": "shared memory",
				"required": 126978, "limit": 101376, "framework": "triton",
				"frame_func": "_init_handles", "frame_line": 374}},
		}},
		{p6 + "triton-out-of-resource-vllm-engine-log-prefix.txt", []lsWant{
			// The excerpt stops before the exception line: a truncated traceback.
			{kind: evidence.PythonException, line: 7, details: anyMap{
				"truncated": true, "frame_func": "__getattribute__", "frame_line": 381,
				"frame_file": "/opt/conda/envs/vllm_python12/lib/python3.10/site-packages/triton/compiler/compiler.py",
				"exception":  nil}},
		}},
		{p6 + "vllm-engine-core-died-unexpectedly-single-line.txt", []lsWant{
			{kind: evidence.Unknown, line: 1, details: anyMap{"symptom": true, "process": "EngineCore_DP0", "framework": "vllm"}},
		}},
		{p6 + "vllm-enginedead-apiserver-then-enginecore-traceback.txt", []lsWant{
			{kind: evidence.Unknown, line: 2, pid: 1, details: anyMap{
				"symptom": true, "process": "APIServer", "exception": "vllm.v1.engine.exceptions.EngineDeadError"}},
			{kind: evidence.PythonException, line: 13, pid: 374, details: anyMap{
				"process": "EngineCore", "truncated": true, "frame_func": "shutdown", "frame_line": 224}},
		}},
		{p6 + "vllm-interleaved-apiserver-enginecore-streams.txt", []lsWant{
			// Demultiplexed: the EngineCore frames form one traceback although
			// every other line is the APIServer's.
			{kind: evidence.PythonException, line: 9, pid: 1778746, details: anyMap{
				"process": "EngineCore_DP0", "truncated": true, "frame_func": "run_engine_core", "frame_line": 859,
				"frames": "[/root/lxt/vllm/vllm-main/vllm/vllm/v1/engine/core.py:859 in run_engine_core /root/miniconda3/lib/python3.12/multiprocessing/process.py:108 in run /root/miniconda3/lib/python3.12/multiprocessing/process.py:314 in _bootstrap]"}},
		}},

		{p2 + "hsa-aperture-violation-callbackqueue-fortran.txt", []lsWant{
			{kind: evidence.GPUPageFault, line: 1, pid: 5999, details: anyMap{
				"status": "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION", "code": "0x29", "tid": "0x7f676e4c7640",
				"source_file": "rocdevice.cpp", "source_line": 2672, "vendor": "amd"}},
		}},
		{p2 + "hsa-memory-access-fault-write-readonly-in-tqdm.txt", []lsWant{
			{kind: evidence.GPUPageFault, line: 1, address: "0x709843600000", details: anyMap{
				"node": 3, "agent_handle": "0x5a5c587a51c0", "reason": "Write access to a read-only page."}},
		}},
		{p2 + "hsa-status-error-memory-fault-old-rocdevice.txt", []lsWant{
			{kind: evidence.GPUPageFault, line: 1, pid: 6856, details: anyMap{
				"status": "HSA_STATUS_ERROR_MEMORY_FAULT", "code": "0x2b", "tid": "0x7fe7bb747700", "source_line": 2614,
				"message": "Agent attempted to access an inaccessible address."}},
		}},
		{p2 + "ollama-docker-page-not-present-aborted.txt", []lsWant{
			{kind: evidence.GPUPageFault, line: 1, address: "0x7fe05f439000", details: anyMap{
				"node": 1, "agent_handle": "0x559ee9967590", "reason": "Page not present or supervisor privilege.", "container": "ollama"}},
			{kind: evidence.NativeCrash, line: 2, details: anyMap{"signal": "SIGABRT", "container": "ollama"}},
		}},
		{p2 + "torch-acceleratorerror-hip-illegal-address.txt", []lsWant{
			{kind: evidence.GPUIllegalMemoryAccess, line: 5, details: anyMap{
				"exception": "torch.AcceleratorError", "runtime": "HIP", "code": "hipErrorIllegalAddress",
				"message": "an illegal memory access was encountered", "frame_func": "cast_to", "frame_line": 1108}},
		}},
		{p2 + "vllm-worker-memory-access-fault-cudagraph-capture.txt", []lsWant{
			{kind: evidence.GPUPageFault, line: 7, address: "0x7ec4dfe0e000", details: anyMap{
				"node": 5, "agent_handle": "0x460e3a50", "reason": "Write access to a read-only page."}},
		}},
		// Kernel-log lines are kernlog's; in program output they are not evidence.
		{p2 + "amdgpu-ring-gfx-timeout-hip-blender-reset.txt", nil},
		{p2 + "amdgpu-ring-sdma0-timeout-gpu-reset-begin-mes.txt", nil},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			fs, err := ScanLog(strings.NewReader(lsCorpus(t, c.file)), "output.log")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if f.File != "output.log" || f.Line < 1 {
					t.Errorf("file/line %q:%d", f.File, f.Line)
				}
			}
			lsCheck(t, c.file, fs, c.want)
		})
	}
}

// TestScanLogCorpusNoFalsePositives: kernel logs, OOM reports and smi tables
// are no program output; scanning them must find nothing.
func TestScanLogCorpusNoFalsePositives(t *testing.T) {
	dir := lsCorpusDir(t)
	for _, cat := range []string{"1-amdgpu-page-fault", "3-nvidia-xid", "4-oom-killer", "5-userspace-crash-dmesg", "7-gpu-tool-output"} {
		files, _ := filepath.Glob(filepath.Join(dir, cat, "*.txt"))
		if len(files) == 0 {
			t.Fatalf("no corpus files in %s", cat)
		}
		for _, f := range files {
			rel := cat + "/" + filepath.Base(f)
			if strings.HasPrefix(filepath.Base(f), "k8s-oomkilled") {
				continue // Kubernetes' own report is read by the log scanner (TestScanLogKubernetesOOMKilled)
			}
			fs, err := ScanLog(strings.NewReader(lsCorpus(t, rel)), rel)
			if cat == "7-gpu-tool-output" {
				// A tool written in Python that crashed (amd-smi's AttributeError on
				// guests) printed a real exception: that one line is evidence.
				fs = slices.DeleteFunc(fs, func(f evidence.Finding) bool { return f.Details.Text(detail.Signature) == exceptionLineSig })
			}
			if err != nil || len(fs) != 0 {
				t.Errorf("%s: %d findings (%v), want none: %+v", rel, len(fs), err, fs)
			}
		}
	}
}

// TestSignaturePrefilterSound checks, on every corpus line, that the literal
// prefilter never rejects a line its regexp matches.
func TestSignaturePrefilterSound(t *testing.T) {
	dir := lsCorpusDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.txt"))
	sigs := BuiltinSignatures()
	with := 0
	for _, s := range sigs {
		if s.literals != nil {
			with++
		}
	}
	if with < len(sigs)/2 {
		t.Errorf("only %d of %d signatures have a prefilter", with, len(sigs))
	}
	var bg lsBigrams
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			content, _ := lsStripPrefixes(lsCleanControl([]byte(line)))
			bg.reset(content)
			for _, s := range sigs {
				if s.re.MatchString(content) && !s.mayMatch(content, &bg) {
					t.Errorf("%s: prefilter %q rejects a line its pattern matches: %q", s.Name, s.literals, content)
				}
			}
		}
	}
}

func TestScanLogPrefixesAndStreams(t *testing.T) {
	log := strings.Join([]string{
		// CRI (containerd) log lines with ANSI colour.
		"2025-03-01T10:00:00.123456789Z stderr F \x1b[31mRuntimeError: CUDA error: an illegal memory access was encountered\x1b[0m",
		// kubectl logs --timestamps
		"2025-03-01T10:00:01.5+00:00 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.15 GiB of which 6.56 MiB is free.",
		// Two Ray/vLLM workers interleaving their tracebacks.
		"(RayWorkerWrapper pid=11, ip=10.0.0.2) Traceback (most recent call last):",
		"(RayWorkerWrapper pid=12, ip=10.0.0.3) Traceback (most recent call last):",
		`(RayWorkerWrapper pid=11, ip=10.0.0.2)   File "/a.py", line 1, in a`,
		`(RayWorkerWrapper pid=12, ip=10.0.0.3)   File "/b.py", line 2, in b`,
		"(RayWorkerWrapper pid=11, ip=10.0.0.2)     a()",
		"(RayWorkerWrapper pid=12, ip=10.0.0.3) KeyError: 'x'",
		"(RayWorkerWrapper pid=11, ip=10.0.0.2) ValueError: bad value",
		// A tqdm bar redrawn with \r, the error glued into a redraw; then CRLF.
		" 10%|#  | 1/10\r 20%|## | 2/10\r 30%|###Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x7f00. Reason: Page not present or supervisor privilege.\r",
		// torchrun rank prefix, glog header
		"[rank3]:[E0101 00:00:00.000000 12 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800650 milliseconds before timing out.",
		// journal prefix
		"Mar  1 10:00:05 node7 python3[4242]: terminate called after throwing an instance of 'c10::Error'",
		// an unrelated line that looks like a prefix but is program text
		"GPU | Name | Memory",
	}, "\n")
	fs, err := ScanLog(strings.NewReader(log), "run.log")
	if err != nil {
		t.Fatal(err)
	}
	lsCheck(t, "prefixes", fs, []lsWant{
		{kind: evidence.GPUIllegalMemoryAccess, line: 1, text: "RuntimeError: CUDA error", details: anyMap{"exception": "RuntimeError"}},
		{kind: evidence.GPUOOM, line: 2, gpu: "3", details: anyMap{"requested_bytes": 20 << 20, "free": "6.56 MiB", "total": "79.15 GiB"}},
		{kind: evidence.PythonException, line: 8, pid: 12, details: anyMap{"exception": "KeyError", "message": "'x'", "frame_file": "/b.py", "frame_line": 2, "process": "RayWorkerWrapper"}},
		{kind: evidence.PythonException, line: 9, pid: 11, details: anyMap{"exception": "ValueError", "frame_file": "/a.py", "frame_func": "a"}},
		{kind: evidence.GPUPageFault, line: 10, address: "0x7f00", details: anyMap{"node": 2}},
		{kind: evidence.CollectiveTimeout, line: 11, details: anyMap{"rank": 3, "seq": 5, "collective": "BROADCAST", "timeout_ms": 1800000, "numel_in": nil}},
		{kind: evidence.NativeCrash, line: 12, details: anyMap{"exception": "c10::Error"}},
	})
	if fs[0].Time == nil || !fs[0].Time.Equal(time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)) {
		t.Errorf("CRI time: %v", fs[0].Time)
	}
	if strings.Contains(fs[0].Text, "\x1b") {
		t.Errorf("ANSI kept: %q", fs[0].Text)
	}
	if fs[1].Time == nil || fs[1].Time.Second() != 1 {
		t.Errorf("kubectl time: %v", fs[1].Time)
	}
}

func TestScanLogFaultHandlerFrames(t *testing.T) {
	log := `step 10
Fatal Python error: Aborted

Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 359 in wait

Current thread 0x00007f0000000002 (most recent call first):
  File "/sgl/python/sglang/srt/layers/moe/fused_moe.py", line 1234 in fused_experts_impl
  File "/sgl/python/sglang/srt/layers/moe/layer.py", line 88 in forward
  File "/torch/nn/modules/module.py", line 1750 in _call_impl

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
next line
`
	fs, _ := ScanLog(strings.NewReader(log), "o")
	lsCheck(t, "faulthandler", fs, []lsWant{{kind: evidence.NativeCrash, line: 2, details: anyMap{
		"signal": "SIGABRT", "thread": "0x00007f0000000002", "threads_dumped": 2,
		"frame_file": "/sgl/python/sglang/srt/layers/moe/fused_moe.py", "frame_line": 1234, "frame_func": "fused_experts_impl",
		"frames": "[/sgl/python/sglang/srt/layers/moe/fused_moe.py:1234 in fused_experts_impl /sgl/python/sglang/srt/layers/moe/layer.py:88 in forward /torch/nn/modules/module.py:1750 in _call_impl]"}}})
}

func TestScanLogHIPAssertAndChainedTraceback(t *testing.T) {
	log := "/pytorch/aten/src/ATen/native/hip/IndexKernel.hip:92: operator(): Device-side assertion `idx < size' failed.\n" +
		"/pytorch/aten/src/ATen/native/hip/IndexKernel.hip:92: operator(): Device-side assertion `idx < size' failed.\n" +
		"Traceback (most recent call last):\n" +
		"  File \"/x.py\", line 3, in <module>\n" +
		"    f()\n" +
		"KeyError: 'a'\n" +
		"\n" +
		"During handling of the above exception, another exception occurred:\n" +
		"\n" +
		"Traceback (most recent call last):\n" +
		"  File \"/x.py\", line 5, in <module>\n" +
		"    g()\n" +
		"mypkg.errors.Boom: it broke\n"
	fs, _ := ScanLog(strings.NewReader(log), "o")
	lsCheck(t, "hip-assert", fs, []lsWant{
		{kind: evidence.GPUDeviceAssert, line: 1, details: anyMap{"assert_file": "/pytorch/aten/src/ATen/native/hip/IndexKernel.hip", "assert_line": 92, "assertion": "idx < size", "count": 2, "threads": nil}},
		{kind: evidence.PythonException, line: 6, details: anyMap{"exception": "KeyError", "frame_line": 3}},
		{kind: evidence.PythonException, line: 13, details: anyMap{"exception": "mypkg.errors.Boom", "message": "it broke", "frame_line": 5,
			"context": "During handling of the above exception, another exception occurred:"}},
	})
}

// TestScanLogBounded: a crash loop printing the same error forever keeps the
// earliest and the latest findings only.
func TestScanLogBounded(t *testing.T) {
	const n = 5000
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&buf, "req %d\nRuntimeError: CUDA error: an illegal memory access was encountered (%d)\n\n\n\n", i, i)
	}
	fs, err := ScanLog(&buf, "o")
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != lsKeepHead+lsKeepTail {
		t.Fatalf("%d findings, want %d", len(fs), lsKeepHead+lsKeepTail)
	}
	if fs[0].Line != 2 || fs[lsKeepHead-1].Line != 2+5*(lsKeepHead-1) {
		t.Errorf("head lines %d..%d", fs[0].Line, fs[lsKeepHead-1].Line)
	}
	last := fs[len(fs)-1]
	if last.Line != 2+5*(n-1) {
		t.Errorf("last line %d, want %d", last.Line, 2+5*(n-1))
	}
	if got := fs[lsKeepHead].Details["dropped_before"]; fmt.Sprint(got) != fmt.Sprint(n-lsKeepHead-lsKeepTail) {
		t.Errorf("dropped_before = %v", got)
	}
}

// TestScanLogHugeLine: an endless line (a progress bar without \r, binary
// junk) is looked at up to lsMaxSegment bytes and the scan goes on after it.
func TestScanLogHugeLine(t *testing.T) {
	r := io.MultiReader(
		strings.NewReader("HIP error: an illegal memory access was encountered "),
		strings.NewReader(strings.Repeat("x", 3*lsMaxSegment)),
		strings.NewReader(" CUDA error: out of memory\nnext\ncudaErrorLaunchTimeout\n"),
	)
	fs, err := ScanLog(r, "o")
	if err != nil {
		t.Fatal(err)
	}
	lsCheck(t, "huge", fs, []lsWant{
		{kind: evidence.GPUIllegalMemoryAccess, line: 1, details: anyMap{"runtime": "HIP"}},
		{kind: evidence.GPUHang, line: 3, details: anyMap{"code": "cudaErrorLaunchTimeout"}},
	})
	if len(fs[0].Text) > lsMaxText+8 {
		t.Errorf("text not capped: %d bytes", len(fs[0].Text))
	}
}

// lsJunkReader produces n bytes of hostile output without holding them:
// thousands of interleaved streams each leaving a traceback open, progress
// bars redrawn with \r and an error glued into every redraw.
type lsJunkReader struct {
	n, i int
	buf  []byte
}

func (r *lsJunkReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if len(r.buf) == 0 {
		r.i++
		r.buf = fmt.Appendf(nil, "(W%d pid=%d)   File \"/x/%d.py\", line %d, in f%s\n 5%%|##\r 6%%|###Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x%x. Reason: x.\r",
			r.i%5000, r.i%5000, r.i, r.i, strings.Repeat("y", r.i%3000), r.i)
	}
	n := copy(p, r.buf)
	if n > r.n {
		n = r.n
	}
	r.buf, r.n = r.buf[n:], r.n-n
	return n, nil
}

func TestScanLogBoundedMemory(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: streams 24 MiB")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fs, err := ScanLog(&lsJunkReader{n: 24 << 20}, "o")
	runtime.GC()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != lsKeepHead+lsKeepTail {
		t.Errorf("%d findings", len(fs))
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d MiB scanning 24 MiB", grew>>20)
	}
}

func TestScanLogMergesErrorCodeLine(t *testing.T) {
	log := "RuntimeError: CUDA error: an illegal memory access was encountered\n" +
		"CUDA kernel errors might be asynchronously reported at some other API call\n" +
		"Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html\n"
	fs, _ := ScanLog(strings.NewReader(log), "o")
	lsCheck(t, "merge", fs, []lsWant{{kind: evidence.GPUIllegalMemoryAccess, line: 1, details: anyMap{"code": "cudaErrorIllegalAddress"}}})
}

func TestLoadSignatures(t *testing.T) {
	good := `signatures:
  - name: my-fault
    kind: gpu_page_fault
    pattern: 'MYLIB fault at (?P<address>0x[0-9a-f]+) on rank (?P<rank>\d+)'
    extract: ['size=(?P<size>[\d.]+ [KMG]iB)']
    details: {vendor: acme}
    description: my library's fault
  - name: sglang-sigquit
    kind: killed
    pattern: 'Received sigquit'
`
	sigs, err := LoadSignatures([]byte(good), "user.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 2 || sigs[0].Line != 2 || sigs[1].Line != 8 || sigs[0].File != "user.yaml" {
		t.Fatalf("sigs %+v", sigs)
	}
	sc, err := NewScanner(sigs)
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := sc.Scan(strings.NewReader("x\nMYLIB fault at 0xdead on rank 4 size=1.5 GiB\n[2025-01-01 00:00:00] Received sigquit from a child process.\n"), "o")
	lsCheck(t, "user", fs, []lsWant{
		{kind: evidence.GPUPageFault, line: 2, address: "0xdead", details: anyMap{"rank": 4, "size": "1.5 GiB", "size_bytes": 1610612736, "vendor": "acme", "signature": "my-fault"}},
		// The user's signature replaces the built-in of the same name.
		{kind: evidence.Killed, line: 3, details: anyMap{"signature": "sglang-sigquit", "symptom": nil}},
	})

	bad := []struct{ yaml, want string }{
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: '(unclosed'\n", "user.yaml: line 2: signature \"a\": pattern: error parsing regexp"},
		{"signatures:\n  - name: a\n    kind: gpu_oops\n    pattern: 'x'\n", "line 2: signature \"a\": kind \"gpu_oops\" is not one of"},
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: 'x'\n    patern: 'y'\n", "user.yaml: line 5: unknown key \"patern\""},
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: 'x*'\n", "matches an empty line"},
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: 'x'\n  - name: a\n    kind: gpu_oom\n    pattern: 'y'\n", "line 5: signature \"a\": name already used at line 2"},
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: 'x'\n    extract: ['y']\n", "extract[0] \"y\" has no named group"},
		{"signatures:\n  - kind: gpu_oom\n    pattern: 'x'\n", "line 2: signature without a name"},
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: '(?P<Bad>x)'\n", "group name \"Bad\""},
		{"signatures:\n  - name: a\n    kind: gpu_oom\n    pattern: '(?P<signature>x)'\n", "group name \"signature\""},
		{"signatures:\n  - name: A B\n    kind: gpu_oom\n    pattern: 'x'\n", "name must be"},
	}
	for _, b := range bad {
		_, err := LoadSignatures([]byte(b.yaml), "user.yaml")
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: error %v, want %q", b.yaml, err, b.want)
		}
	}
	if s, err := LoadSignatures(nil, "empty.yaml"); err != nil || len(s) != 0 {
		t.Errorf("empty file: %v %v", s, err)
	}
}

func TestSetExtraSignatures(t *testing.T) {
	sigs, err := LoadSignatures([]byte("signatures:\n  - name: zzz\n    kind: hang\n    pattern: 'ZZZ stuck'\n"), "u.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := SetExtraSignatures(sigs); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = SetExtraSignatures(nil) }()
	fs, _ := ScanLog(strings.NewReader("ZZZ stuck\n"), "o")
	lsCheck(t, "extra", fs, []lsWant{{kind: evidence.Hang, line: 1}})
	_ = SetExtraSignatures(nil)
	if fs, _ := ScanLog(strings.NewReader("ZZZ stuck\n"), "o"); len(fs) != 0 {
		t.Errorf("extra signatures still active: %v", fs)
	}
}

func TestBuiltinSignatures(t *testing.T) {
	sigs := BuiltinSignatures()
	if len(sigs) < 30 {
		t.Fatalf("%d built-in signatures", len(sigs))
	}
	for _, s := range sigs {
		if s.Description == "" {
			t.Errorf("%s (line %d): no description", s.Name, s.Line)
		}
	}
}

func TestEvidenceTextWindow(t *testing.T) {
	bar := strings.Repeat("█", 300)
	raw := " 33%|" + bar + "Memory access fault by GPU node-3 (Agent handle: 0x1) on address 0x2. Reason: x."
	got := lsEvidenceText(raw, raw, strings.Index(raw, "Memory"))
	if !strings.HasPrefix(got, "…Memory access fault") {
		t.Errorf("window %q", got)
	}
}

func BenchmarkScanLog(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 8<<20; i++ {
		fmt.Fprintf(&buf, "(Worker_TP%d pid=%d) INFO 02-24 02:39:34 [gpu_model_runner.py:4758] Decode batch. #running-req: %d, #token: %d, token usage: 0.12, gen throughput (token/s): 1234.5\n", i%8, 3000+i%8, i%64, i*7)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ScanLog(bytes.NewReader(data), "o"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanLogWithCues is what a crash costs to scan since the generic
// fallback: the run's output and any given log are read for its cues too
// (ScanLogWithCues). Two texts: BenchmarkScanLog's healthy server lines, and
// the real crash logs of the unseen dev split end to end (dense with
// failure words).
func BenchmarkScanLogWithCues(b *testing.B) {
	var healthy bytes.Buffer
	for i := 0; healthy.Len() < 8<<20; i++ {
		fmt.Fprintf(&healthy, "(Worker_TP%d pid=%d) INFO 02-24 02:39:34 [gpu_model_runner.py:4758] Decode batch. #running-req: %d, #token: %d, token usage: 0.12, gen throughput (token/s): 1234.5\n", i%8, 3000+i%8, i%64, i*7)
	}
	var crashes bytes.Buffer
	for _, s := range loadUnseen(b, "dev") {
		crashes.WriteString(s.text)
		crashes.WriteByte('\n')
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"healthy", healthy.Bytes()}, {"crashes", crashes.Bytes()}} {
		for _, scan := range []struct {
			name string
			fn   func(io.Reader, string) ([]evidence.Finding, error)
		}{{"plain", ScanLog}, {"cues", ScanLogWithCues}} {
			b.Run(c.name+"/"+scan.name, func(b *testing.B) {
				b.SetBytes(int64(len(c.data)))
				for i := 0; i < b.N; i++ {
					if _, err := scan.fn(bytes.NewReader(c.data), "o"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
