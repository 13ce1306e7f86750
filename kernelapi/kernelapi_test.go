package kernelapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/internal/kapigen"
	"github.com/kcrash/kcrash/internal/testenv"
)

const kaDir = "testdata"

// kaWant is what a sample must yield; "" / nil / 0 fields are checked to be
// absent unless noted.
type kaWant struct {
	format     string
	level      int
	calls      int64
	last       string // API of the last call
	lastLine   int
	lastFin    bool
	lastExc    string // prefix of LastCall.Exception
	lastBefore time.Duration
	unfinished string // API of the unfinished call, "" for none
	unfArgs    []Arg  // checked by name: shape, dtype, type, value
	nonfinite  *kaNF
	statsBad   *kaNF
	jumps      []ShapeJump // API, Arg, From, To, Dim, Line
	jumpsTotal int64
	exceptions []Exception // API, Type, Line, and Text prefix
	nfTotal    int64
}

type kaNF struct {
	api, arg string
	nan, inf int64
	line     int
	finished bool
	shape    string
	stats    string
}

func TestKernelAPISamples(t *testing.T) {
	tests := []struct {
		file string
		want kaWant
	}{
		{
			// §7 (a): level 1, ROCm, the last call raised; nothing can be
			// said about unfinished calls at level 1.
			file: "7a-level1-rocm-exception.log",
			want: kaWant{
				format: "sglang", level: 1, calls: 16,
				last: "sglang.quant_method.Fp8MoEMethod.apply", lastLine: 32,
				lastExc: "AcceleratorError: HIP error: an illegal memory access was encountered",
				exceptions: []Exception{{
					API: "sglang.quant_method.Fp8MoEMethod.apply", Type: "AcceleratorError", Line: 33,
					Text: "AcceleratorError: HIP error: an illegal memory access was encountered\n" +
						"HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n" +
						"For debugging consider passing AMD_SERIALIZE_KERNEL=3\n" +
						"Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
				}},
			},
		},
		{
			// §7 (b): level 3, M 1 → 288 on the call that never returned.
			file: "7b-level3-shape-jump.log",
			want: kaWant{
				format: "sglang", level: 3, calls: 3,
				last: "sglang.quant_method.Fp8LinearMethod.apply", lastLine: 46,
				unfinished: "sglang.quant_method.Fp8LinearMethod.apply",
				unfArgs: []Arg{
					{Name: "arg[0]", Type: "QKVParallelLinear", Value: "QKVParallelLinear(in_features=4096, output_features=6144, bias=False, tp_size=1, gather_output=False)"},
					{Name: "arg[1]", Type: "Tensor", Shape: "(288, 4096)", Dtype: "torch.bfloat16", Device: "cuda:0"},
					{Name: "arg[2]", Value: "None"},
				},
				jumps: []ShapeJump{{API: "sglang.quant_method.Fp8LinearMethod.apply", Arg: "arg[1]",
					From: "(1, 4096)", To: "(288, 4096)", Dim: 0, Line: 46}},
				jumpsTotal: 1,
			},
		},
		{
			// §7 (c): level 5; the RMSNorm input already holds two infs.
			file: "7c-level5-nonfinite.log",
			want: kaWant{
				format: "sglang", level: 5, calls: 3,
				last: "sglang.custom_op.moe_align_block_size", lastLine: 47,
				unfinished: "sglang.custom_op.moe_align_block_size",
				unfArgs: []Arg{{Name: "arg[0]", Type: "Tensor", Shape: "(4, 8)", Dtype: "torch.int32", Device: "cuda:0",
					Min: "-1.000000", Max: "127.000000", Mean: "55.281250"}},
				nonfinite: &kaNF{api: "RMSNorm.forward", arg: "arg[0]", inf: 2, line: 2, finished: true, shape: "(4, 4096)"},
				nfTotal:   3, // RMSNorm in (inf), RMSNorm out (nan), topk in (nan)
			},
		},
		{
			// FlashInfer level 5 (api_logging.py layout: values on the line
			// after `arg[i]:`, stride, Output value at 2 spaces).
			file: "fi-level5-decode-nan.log",
			want: kaWant{
				format: "flashinfer", level: 5, calls: 3,
				last: "BatchDecodeWithPagedKVCacheWrapper.run", lastLine: 130,
				unfinished: "BatchDecodeWithPagedKVCacheWrapper.run",
				unfArgs: []Arg{
					{Name: "arg[0]", Type: "Tensor", Shape: "(8, 32, 128)", Stride: "(4096, 128, 1)", Dtype: "torch.bfloat16", Device: "cuda:0",
						NanCount: 32768, Min: "nan", Max: "nan", Mean: "nan"},
					{Name: "arg[1]", Type: "Tensor", Shape: "(1024, 2, 8, 16, 128)", Stride: "(32768, 16384, 2048, 128, 1)", Dtype: "torch.bfloat16", Device: "cuda:0",
						Stats: "statistics error: CUDA error: an illegal memory access was encountered"},
				},
				// The decode output is the first non-finite tensor.
				nonfinite: &kaNF{api: "BatchDecodeWithPagedKVCacheWrapper.run", arg: "return", nan: 4096, line: 72, finished: true, shape: "(1, 32, 128)"},
				statsBad: &kaNF{api: "BatchDecodeWithPagedKVCacheWrapper.run", arg: "arg[1]", line: 130, shape: "(1024, 2, 8, 16, 128)",
					stats: "statistics error: CUDA error: an illegal memory access was encountered"},
				jumps: []ShapeJump{{API: "BatchDecodeWithPagedKVCacheWrapper.run", Arg: "arg[0]", From: "(1, 32, 128)", To: "(8, 32, 128)", Dim: 0, Line: 130}},
				// arg[1] was a tuple in the first decode and a tensor in
				// the second: a different name, so no jump.
				jumpsTotal: 1,
				nfTotal:    2,
			},
		},
		{
			// SGLang level 3 and FlashInfer level 1 sharing stdout, with
			// server lines in between. The FlashInfer call is the last one,
			// but at level 1 nothing says it did not return; the SGLang
			// attention call that wraps it certainly did not.
			file: "mixed-sglang3-flashinfer1.log",
			want: kaWant{
				format: "mixed", level: 3, calls: 4,
				last: "BatchDecodeWithPagedKVCacheWrapper.run", lastLine: 36,
				unfinished: "srt.layers.attention.flashinfer_backend.FlashInferAttnBackend.forward_decode",
				unfArgs: []Arg{
					{Name: "arg[0]", Type: "Tensor", Shape: "(5, 4096)", Dtype: "torch.bfloat16", Device: "cuda:0"},
					{Name: "save_kv_cache", Value: "True"},
				},
				jumps: []ShapeJump{{API: "srt.layers.attention.flashinfer_backend.FlashInferAttnBackend.forward_decode",
					Arg: "arg[0]", From: "(4, 4096)", To: "(5, 4096)", Dim: 0, Line: 25}},
				jumpsTotal: 1,
			},
		},
		{
			// Nested wrappers: the outer Output follows the inner one; an
			// inner exception is logged by both wrappers.
			file: "nested-exception.log",
			want: kaWant{
				format: "sglang", level: 3, calls: 5,
				last: "RMSNorm.forward", lastLine: 54, lastFin: true,
				exceptions: []Exception{
					{API: "sglang.custom_op.topk_softmax", Type: "RuntimeError", Line: 51, Text: "RuntimeError: CUDA error: device-side assert triggered"},
					{API: "sglang.quant_method.Fp8MoEMethod.apply", Type: "RuntimeError", Line: 52, Text: "RuntimeError: CUDA error: device-side assert triggered"},
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := Analyze([]string{filepath.Join(kaDir, tc.file)})
			if err != nil {
				t.Fatal(err)
			}
			checkKA(t, r, tc.want)
		})
	}
}

func checkKA(t *testing.T, r *Report, w kaWant) {
	t.Helper()
	if r.Format != w.format || r.Level != w.level || r.Calls != w.calls {
		t.Errorf("format/level/calls = %q/%d/%d, want %q/%d/%d", r.Format, r.Level, r.Calls, w.format, w.level, w.calls)
	}
	if r.LastCall == nil {
		t.Fatalf("no last call")
	}
	lc := r.LastCall
	if lc.API != w.last || lc.Line != w.lastLine || lc.Finished != w.lastFin || !strings.HasPrefix(lc.Exception, w.lastExc) || (w.lastExc == "") != (lc.Exception == "") {
		t.Errorf("last call = %s line %d finished %v exception %q; want %s line %d finished %v exception %q",
			lc.API, lc.Line, lc.Finished, lc.Exception, w.last, w.lastLine, w.lastFin, w.lastExc)
	}
	if lc.Time == nil || lc.BeforeEnd != w.lastBefore {
		t.Errorf("last call time %v before end %v, want a time and %v", lc.Time, lc.BeforeEnd, w.lastBefore)
	}
	if w.unfinished == "" {
		if r.UnfinishedCall != nil {
			t.Errorf("unfinished call %s (line %d), want none", r.UnfinishedCall.API, r.UnfinishedCall.Line)
		}
	} else {
		u := r.UnfinishedCall
		if u == nil {
			t.Fatalf("no unfinished call, want %s", w.unfinished)
		}
		if u.API != w.unfinished || u.Finished {
			t.Errorf("unfinished call = %s finished=%v, want %s", u.API, u.Finished, w.unfinished)
		}
		checkArgs(t, u.Args, w.unfArgs)
	}
	checkNF(t, "first_nonfinite", r.FirstNonfinite, w.nonfinite)
	checkNF(t, "first_stats_unavailable", r.FirstStatsUnavailable, w.statsBad)
	if r.NonfiniteTensors != w.nfTotal {
		t.Errorf("nonfinite tensors = %d, want %d", r.NonfiniteTensors, w.nfTotal)
	}
	if r.ShapeJumpsTotal != w.jumpsTotal || len(r.ShapeJumps) != len(w.jumps) {
		t.Errorf("shape jumps = %d (%+v), want %d (%+v)", r.ShapeJumpsTotal, r.ShapeJumps, w.jumpsTotal, w.jumps)
	} else {
		for i, j := range r.ShapeJumps {
			x := w.jumps[i]
			if j.API != x.API || j.Arg != x.Arg || j.From != x.From || j.To != x.To || j.Dim != x.Dim || j.Line != x.Line || j.File == "" || j.Time == nil {
				t.Errorf("jump %d = %+v, want %+v", i, j, x)
			}
		}
	}
	if len(r.Exceptions) != len(w.exceptions) || r.ExceptionsTotal != int64(len(w.exceptions)) {
		t.Errorf("exceptions = %d/%d %+v, want %+v", len(r.Exceptions), r.ExceptionsTotal, r.Exceptions, w.exceptions)
	} else {
		for i, e := range r.Exceptions {
			x := w.exceptions[i]
			if e.API != x.API || e.Type != x.Type || e.Line != x.Line || e.Text != x.Text || e.Time == nil {
				t.Errorf("exception %d = %+v\nwant %+v", i, e, x)
			}
		}
	}
	// Consumers index these without nil checks.
	if r.ShapeJumps == nil || r.Exceptions == nil || r.DumpDirs == nil || r.Files == nil {
		t.Errorf("nil list in report")
	}
}

func checkArgs(t *testing.T, got, want []Arg) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("args = %+v\nwant %+v", got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("arg %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func checkNF(t *testing.T, what string, got *NonfiniteTensor, w *kaNF) {
	t.Helper()
	if w == nil {
		if got != nil {
			t.Errorf("%s = %+v, want none", what, got)
		}
		return
	}
	if got == nil {
		t.Errorf("%s missing, want %+v", what, *w)
		return
	}
	if got.Call.API != w.api || got.Arg.Name != w.arg || got.Arg.NanCount != w.nan || got.Arg.InfCount != w.inf ||
		got.Call.Line != w.line || got.Call.Finished != w.finished || got.Arg.Shape != w.shape || got.Arg.Stats != w.stats || got.Call.Time == nil {
		t.Errorf("%s = call %s line %d finished %v, arg %+v; want %+v", what, got.Call.API, got.Call.Line, got.Call.Finished, got.Arg, *w)
	}
}

// Two TP workers with a file each (LOGDEST=kapi_%i.log): calls are taken in
// time order over both files, whatever order the files are given in.
func TestKernelAPIMergePerPid(t *testing.T) {
	f1, f2 := filepath.Join(kaDir, "merge/kapi_1001.log"), filepath.Join(kaDir, "merge/kapi_1002.log")
	for _, order := range [][]string{{f1, f2}, {f2, f1}} {
		r, err := Analyze(order)
		if err != nil {
			t.Fatal(err)
		}
		if r.Calls != 6 || r.Level != 5 || len(r.Files) != 2 {
			t.Errorf("calls/level/files = %d/%d/%d", r.Calls, r.Level, len(r.Files))
		}
		// The last call is pid 1002's all_reduce at :06, a second after
		// pid 1001 died inside its linear layer at :05.
		if lc := r.LastCall; lc == nil || lc.API != "sglang.custom_op.all_reduce" || lc.Pid != 1002 || lc.File != f2 || lc.BeforeEnd != 0 {
			t.Errorf("last call = %+v", lc)
		}
		u := r.UnfinishedCall
		if u == nil || u.API != "sglang.quant_method.Fp8LinearMethod.apply" || u.Pid != 1001 || u.Line != 58 || u.BeforeEnd != time.Second {
			t.Fatalf("unfinished call = %+v", u)
		}
		if len(r.UnfinishedCalls) != 2 || r.UnfinishedCalls[1].Pid != 1002 || r.UnfinishedCalls[1].API != "sglang.custom_op.all_reduce" {
			t.Errorf("unfinished calls = %+v", r.UnfinishedCalls)
		}
		// pid 1002 saw NaN at :04, before pid 1001's inf at :05, although
		// pid 1001's file may come first.
		nf := r.FirstNonfinite
		if nf == nil || nf.Call.Pid != 1002 || nf.Call.API != "RMSNorm.forward" || nf.Arg.Name != "arg[0]" || nf.Arg.NanCount != 3 || nf.Call.Line != 30 || !nf.Call.Finished || nf.Call.BeforeEnd != 2*time.Second {
			t.Errorf("first nonfinite = %+v", nf)
		}
		if r.NonfiniteTensors != 5 {
			t.Errorf("nonfinite tensors = %d, want 5", r.NonfiniteTensors)
		}
		if r.Start == nil || r.End == nil || r.End.Sub(*r.Start) != 3*time.Second {
			t.Errorf("start/end = %v/%v", r.Start, r.End)
		}
		// Same shapes in both files and per file: no jump across pids.
		if r.ShapeJumpsTotal != 0 {
			t.Errorf("shape jumps = %+v", r.ShapeJumps)
		}
	}
}

func TestKernelAPIGzipAndStdinNames(t *testing.T) {
	src := filepath.Join(kaDir, "7b-level3-shape-jump.log")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	p := filepath.Join(t.TempDir(), "kapi_4242.log.gz")
	if err := os.WriteFile(p, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Analyze([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 3 || r.UnfinishedCall == nil || r.UnfinishedCall.Pid != 4242 || r.UnfinishedCall.Args[1].Shape != "(288, 4096)" || r.Bytes != int64(len(raw)) {
		t.Errorf("gz: calls %d, unfinished %+v, bytes %d", r.Calls, r.UnfinishedCall, r.Bytes)
	}

	// A .gz cut short (a size-capped bundle) keeps what it could read.
	cut := gz.Bytes()[:gz.Len()*2/3]
	r, err = AnalyzeReaders([]NamedReader{{Name: "cut.gz", Reader: bytes.NewReader(cut)}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls == 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "unexpected EOF") {
		t.Errorf("cut gz: calls %d warnings %q", r.Calls, r.Warnings)
	}

	// Not gzip at all, and a gzip header only.
	if _, err := AnalyzeReaders([]NamedReader{{Name: "bad.gz", Reader: bytes.NewReader([]byte{0x1f, 0x8b, 0})}}); err == nil {
		t.Errorf("broken gzip header: no error")
	}
	if _, err := Analyze(nil); err == nil {
		t.Errorf("no files: no error")
	}
	if _, err := Analyze([]string{filepath.Join(t.TempDir(), "missing.log")}); err == nil {
		t.Errorf("missing file: no error")
	}
}

func TestKernelAPIPidFromName(t *testing.T) {
	for name, want := range map[string]int{
		"/var/log/kcrash/kapi_48213.log":      48213,
		"kapi_48213.log.gz":                   48213,
		"kapi_48213.log.1":                    48213,
		"sglang_kernel_api_level3_950201.log": 950201,
		"log_12345.txt":                       12345,
		"kapi.777":                            777,
		"sglang_kernel_api_level3.log":        0,
		"7a-level1-rocm-exception.log":        0,
		"kernel-api.log":                      0,
		"-":                                   0,
		"kapi_99999999999.log":                0,
	} {
		if got := pidFromName(name); got != want {
			t.Errorf("pidFromName(%q) = %d, want %d", name, got, want)
		}
	}
	if got := pidFromDumpDir([]byte("d/20260319_004821_182_pid919286_RotaryEmbedding.forward_call0001")); got != 919286 {
		t.Errorf("pidFromDumpDir = %d", got)
	}
}

func TestKernelAPILevel10DumpDirs(t *testing.T) {
	log := filepath.Join(kaDir, "level10/kapi_919286.log")
	r, err := Analyze([]string{log})
	if err != nil {
		t.Fatal(err)
	}
	crash := "sglang_kernel_api_dumps/20260502_150244_381_pid919286_sglang.custom_op.mock_llm_cuda_crash_call0001"
	if r.Level != 10 || len(r.DumpDirs) != 1 {
		t.Fatalf("level %d, dump dirs %+v", r.Level, r.DumpDirs)
	}
	// The RMSNorm dir got its outputs; the crashing op's did not, and its
	// metadata (found next to the log) agrees.
	if d := r.DumpDirs[0]; d.Path != crash || d.API != "sglang.custom_op.mock_llm_cuda_crash" || d.State != "inputs_saved" || d.Source != "metadata" {
		t.Errorf("dump dir = %+v", d)
	}
	if u := r.UnfinishedCall; u == nil || u.API != "sglang.custom_op.mock_llm_cuda_crash" || u.DumpDir != crash || u.Pid != 919286 {
		t.Errorf("unfinished = %+v", u)
	}

	// Without the disk the log alone says the same, from its own lines.
	r, err = Options{SkipDumpCheck: true}.Analyze([]string{log})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.DumpDirs) != 1 || r.DumpDirs[0].Source != "log" || r.DumpDirs[0].State != "inputs_saved" {
		t.Errorf("dump dirs without disk = %+v", r.DumpDirs)
	}

	// Dump roots add dirs the log does not name (an earlier run, another
	// logger): FlashInfer's metadata.jsonl is read to its last record.
	roots := []string{filepath.Join(kaDir, "level10/sglang_kernel_api_dumps"), filepath.Join(kaDir, "level10/flashinfer_dumps")}
	r, err = Options{DumpRoots: roots}.Analyze([]string{log})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range r.DumpDirs {
		got[filepath.Base(d.Path)] = d.API + " " + d.State + " " + d.Source
	}
	want := map[string]string{
		"20260502_150244_381_pid919286_sglang.custom_op.mock_llm_cuda_crash_call0001":   "sglang.custom_op.mock_llm_cuda_crash inputs_saved metadata",
		"20260502_150240_002_pid919286_RotaryEmbedding.forward_call0001":                "RotaryEmbedding.forward exception metadata",
		"20260502_150243_999_pid919286_BatchDecodeWithPagedKVCacheWrapper.run_call0007": "BatchDecodeWithPagedKVCacheWrapper.run inputs_saved metadata",
	}
	if len(got) != len(want) || len(r.DumpDirs) != len(want) {
		t.Errorf("dump dirs = %+v", r.DumpDirs)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dump dir %s = %q, want %q", k, got[k], v)
		}
	}
}

// A log cut in the middle of a line (the process died mid-write, or a bundle
// kept a size-limited tail) still yields the call and what was read of it.
func TestKernelAPITruncatedLastLine(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(kaDir, "7b-level3-shape-jump.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the last shape line: "      shape=(288, 40".
	i := bytes.LastIndex(raw, []byte("shape=(288, 4096)"))
	r, err := AnalyzeReaders([]NamedReader{{Name: "cut.log", Reader: bytes.NewReader(raw[:i+len("shape=(288, 40")])}})
	if err != nil {
		t.Fatal(err)
	}
	u := r.UnfinishedCall
	if u == nil || u.API != "sglang.quant_method.Fp8LinearMethod.apply" || len(u.Args) != 2 || u.Args[1].Shape != "(288, 40" || u.Args[1].Dtype != "" {
		t.Fatalf("unfinished = %+v", u)
	}
	if r.Lines != 52 || len(r.ShapeJumps) != 1 || r.ShapeJumps[0].To != "(288, 40" {
		t.Errorf("lines %d, jumps %+v", r.Lines, r.ShapeJumps)
	}

	// Cut inside the last call's header.
	j := bytes.LastIndex(raw, []byte("Kernel API Call: ")) + len("Kernel API Call: sglang.quant")
	r, err = AnalyzeReaders([]NamedReader{{Name: "cut.log", Reader: bytes.NewReader(raw[:j])}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 3 || r.LastCall == nil || r.LastCall.API != "sglang.quant" || r.UnfinishedCall == nil || r.UnfinishedCall.API != "sglang.quant" {
		t.Errorf("calls %d last %+v unfinished %+v", r.Calls, r.LastCall, r.UnfinishedCall)
	}
}

// Garbage, binary data and lines far longer than the read buffer must neither
// panic nor grow memory with the input.
func TestKernelAPIGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bin := make([]byte, 4<<20)
	for i := range bin {
		bin[i] = byte(rng.Uint32())
	}
	long := bytes.Repeat([]byte("[2026-05-02 14:21:10] SGLang Kernel API Call: x"), 100000) // 4.7 MB, one line
	sample, _ := os.ReadFile(filepath.Join(kaDir, "7c-level5-nonfinite.log"))
	mixed := append(append(append([]byte{}, sample...), bin[:1<<20]...), sample...)
	for name, data := range map[string][]byte{
		"binary":      bin,
		"zeros":       make([]byte, 3<<20),
		"long-line":   long,
		"newlines":    bytes.Repeat([]byte("\n"), 1<<20),
		"mixed":       mixed,
		"seps":        bytes.Repeat([]byte(strings.Repeat("=", 80)+"\n  arg[0]=Tensor(\n      nan_count=9\n"), 10000),
		"outputs":     bytes.Repeat([]byte("Output:\n  return=Tensor(\n      nan_count=1\n    )\nOutput value:\n  Tensor(\n"), 10000),
		"exceptions":  bytes.Repeat([]byte("[2026-05-02 14:21:10] SGLang Kernel API Exception: f (E: x\nmore\n"), 10000),
		"empty":       nil,
		"cr-newlines": bytes.ReplaceAll(sample, []byte("\n"), []byte("\r\n")),
	} {
		t.Run(name, func(t *testing.T) {
			r, err := AnalyzeReaders([]NamedReader{{Name: name, Reader: bytes.NewReader(data)}})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Exceptions) > maxExcFirst+maxExcLast || len(r.ShapeJumps) > maxJumps || len(r.DumpDirs) > maxDumpDirs {
				t.Errorf("unbounded lists: %d %d %d", len(r.Exceptions), len(r.ShapeJumps), len(r.DumpDirs))
			}
			if _, err := json.Marshal(r); err != nil {
				t.Error(err)
			}
			switch name {
			case "long-line":
				if r.Calls != 1 || r.Lines != 1 || r.Bytes != int64(len(long)) || r.LastCall == nil || len(r.LastCall.API) > maxAPIName {
					t.Errorf("long line: calls %d lines %d bytes %d", r.Calls, r.Lines, r.Bytes)
				}
			case "mixed", "cr-newlines":
				if r.Calls != 6 && name == "mixed" || r.FirstNonfinite == nil || r.FirstNonfinite.Arg.InfCount != 2 {
					t.Errorf("%s: calls %d first nonfinite %+v", name, r.Calls, r.FirstNonfinite)
				}
			case "exceptions":
				if r.ExceptionsTotal != 10000 || len(r.Exceptions) != maxExcFirst+maxExcLast || r.Exceptions[0].Text != "E: x\nmore" {
					t.Errorf("exceptions: %d %d %+v", r.ExceptionsTotal, len(r.Exceptions), r.Exceptions[0])
				}
			case "binary", "zeros", "newlines", "empty", "seps", "outputs":
				if r.Calls != 0 || r.LastCall != nil || r.FirstNonfinite != nil || r.Format != "" || r.Level != 0 {
					t.Errorf("%s: %+v", name, r)
				}
			}
		})
	}
}

// The analyzer's allocations must not grow with the log: a level-3 log of
// tens of MB is read with a few MB allocated in all.
func TestKernelAPIConstantMemory(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: reads 48 MiB")
	}
	const size = 48 << 20
	analyze := func() (*Report, uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r, err := AnalyzeReaders([]NamedReader{{Name: "kapi_4242.log", Reader: kapigen.NewReader(kapigen.Options{Size: size, Seed: 7, Layers: 8})}})
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return r, after.TotalAlloc - before.TotalAlloc
	}
	r, alloc := analyze()
	t.Logf("%d calls, %d lines, %.1f MiB allocated for %d MiB read", r.Calls, r.Lines, float64(alloc)/(1<<20), r.Bytes>>20)
	if alloc > 8<<20 {
		t.Errorf("allocated %d bytes for a %d-byte log", alloc, r.Bytes)
	}
	// The generated log ends inside a linear layer fed a 288-token chunk.
	if u := r.UnfinishedCall; u == nil || u.API != "sglang.quant_method.Fp8LinearMethod.apply" || u.Args[1].Shape != "(288, 4096)" || u.Pid != 4242 {
		t.Errorf("unfinished = %+v", u)
	}
	if r.Level != 3 || r.Calls < 50000 || r.ShapeJumpsTotal == 0 || len(r.ShapeJumps) != maxJumps {
		t.Errorf("level %d calls %d jumps %d/%d", r.Level, r.Calls, r.ShapeJumpsTotal, len(r.ShapeJumps))
	}
	if last := r.ShapeJumps[len(r.ShapeJumps)-1]; last.To != "(288, 4096)" || last.API != "sglang.quant_method.Fp8LinearMethod.apply" || int64(last.Line) != int64(r.UnfinishedCall.Line) {
		t.Errorf("last jump = %+v", last)
	}
}

// BeforeEnd can be taken against the run's exit rather than the log's end.
func TestKernelAPIOptionsEndAndLocation(t *testing.T) {
	loc := time.FixedZone("CEST", 2*3600)
	end := time.Date(2026, 5, 2, 14, 21, 40, 0, loc)
	r, err := Options{Location: loc, End: end}.Analyze([]string{filepath.Join(kaDir, "7b-level3-shape-jump.log")})
	if err != nil {
		t.Fatal(err)
	}
	if r.UnfinishedCall.BeforeEnd != 30*time.Second || r.UnfinishedCall.Time.Location() != loc || r.UnfinishedCall.Time.UTC().Hour() != 12 {
		t.Errorf("unfinished = %+v", r.UnfinishedCall)
	}
	b, err := json.Marshal(r.UnfinishedCall)
	if err != nil || !bytes.Contains(b, []byte(`"before_end_ns":30000000000`)) || !bytes.Contains(b, []byte(`"time":"2026-05-02T14:21:10+02:00"`)) {
		t.Errorf("json = %s", b)
	}
}

// Stdin is "-"; reading it twice is refused rather than silently empty.
func TestKernelAPIStdin(t *testing.T) {
	f, err := os.Open(filepath.Join(kaDir, "7a-level1-rocm-exception.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	r, err := Analyze([]string{"-"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 16 || r.LastCall.File != "-" || r.LastCall.Pid != 0 {
		t.Errorf("stdin: %+v", r.LastCall)
	}
	if _, err := Analyze([]string{"-", "-"}); err == nil {
		t.Errorf("stdin twice: no error")
	}
}

func FuzzAnalyze(f *testing.F) {
	for _, name := range []string{"7a-level1-rocm-exception.log", "7b-level3-shape-jump.log", "7c-level5-nonfinite.log",
		"fi-level5-decode-nan.log", "mixed-sglang3-flashinfer1.log", "nested-exception.log", "level10/kapi_919286.log",
		"merge/kapi_1001.log"} {
		b, err := os.ReadFile(filepath.Join(kaDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, b[len(b)/2:])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		r, err := Options{SkipDumpCheck: true}.AnalyzeReaders([]NamedReader{
			{Name: "kapi_1.log", Reader: bytes.NewReader(a)},
			{Name: "kapi_2.log", Reader: io.MultiReader(bytes.NewReader(b), bytes.NewReader(a))},
		})
		if err != nil {
			if len(a) >= 2 && a[0] == 0x1f && a[1] == 0x8b || len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
				return // not a gzip stream after all
			}
			t.Fatal(err)
		}
		if r.Calls < 0 || (r.Calls == 0) != (r.LastCall == nil) {
			t.Fatalf("calls %d, last %v", r.Calls, r.LastCall)
		}
		if r.UnfinishedCall != nil && (r.UnfinishedCall.Finished || len(r.UnfinishedCalls) == 0) {
			t.Fatalf("unfinished %+v", r.UnfinishedCall)
		}
		if len(r.Exceptions) > maxExcFirst+maxExcLast || len(r.ShapeJumps) > maxJumps {
			t.Fatalf("lists grew: %d %d", len(r.Exceptions), len(r.ShapeJumps))
		}
		gz := len(a) >= 2 && a[0] == 0x1f && a[1] == 0x8b || len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b
		if !gz && int64(len(a))*2+int64(len(b)) != r.Bytes {
			t.Fatalf("bytes %d, want %d", r.Bytes, len(a)*2+len(b))
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}
