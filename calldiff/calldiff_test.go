package calldiff

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sgCall renders one call the way SGLang's logger does (reference §3.2–3.4):
// separator, header, positional tensor arguments, and, when it returned, the
// output. stats (level 5) are the lines after is_contiguous, or nil.
type tensor struct {
	shape, dtype string
	stats        []string
}

func sgCall(b *strings.Builder, api string, args []tensor, ret *tensor) {
	b.WriteString(strings.Repeat("=", 80) + "\n")
	fmt.Fprintf(b, "[2026-05-02 14:21:09] SGLang Kernel API Call: %s\n", api)
	block := func(key string, t tensor) {
		fmt.Fprintf(b, "  %s=Tensor(\n      shape=%s\n      dtype=%s\n      device=cuda:0\n      requires_grad=False\n      is_contiguous=True\n", key, t.shape, t.dtype)
		for _, s := range t.stats {
			fmt.Fprintf(b, "      %s\n", s)
		}
		b.WriteString("    )\n")
	}
	if len(args) > 0 {
		b.WriteString("Positional input arguments:\n")
		for i, t := range args {
			block(fmt.Sprintf("arg[%d]", i), t)
		}
	}
	if ret != nil {
		b.WriteString("Output:\n")
		block("return", *ret)
	}
}

func stats(min, max string, nan int) []string {
	return []string{"min=" + min, "max=" + max, "mean=0.000000", fmt.Sprintf("nan_count=%d", nan), "inf_count=0"}
}

// model writes the calls of forward passes at the given batch sizes; skipNorm
// leaves out qk_norm (another code path), nanAt poisons that pass's output.
func model(ms []int, skipNorm bool, crashLast bool, nanAt int) string {
	var b strings.Builder
	for i, m := range ms {
		x := tensor{fmt.Sprintf("(%d, 64)", m), "torch.bfloat16", stats("-1.000000", "1.000000", 0)}
		sgCall(&b, "RMSNorm.forward", []tensor{x}, &x)
		sgCall(&b, "tiny.qkv_proj", []tensor{x}, &tensor{fmt.Sprintf("(%d, 192)", m), "torch.bfloat16", stats("-2.000000", "2.000000", 0)})
		if !skipNorm {
			sgCall(&b, "tiny.qk_norm", []tensor{x}, &x)
		}
		out := tensor{fmt.Sprintf("(%d, 128)", m), "torch.bfloat16", stats("-3.000000", "3.000000", 0)}
		if i == nanAt {
			out.stats = stats("nan", "nan", 128*m)
		}
		last := crashLast && i == len(ms)-1
		if last {
			sgCall(&b, "tiny.gate_up", []tensor{x}, nil)
			break
		}
		sgCall(&b, "tiny.gate_up", []tensor{x}, &out)
		sgCall(&b, "tiny.down_proj", []tensor{out}, &x)
	}
	return b.String()
}

func write(t *testing.T, name, text string, gz bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if gz {
		zw := gzip.NewWriter(f)
		zw.Write([]byte(text))
		zw.Close()
	} else {
		f.WriteString(text)
	}
	return p
}

// The bad run took another code path (no qk_norm), met a batch of 288 the
// good run never saw, and died inside gate_up: the diff names the missing
// call as the first divergence and in the whole-run counts, the shape jump
// between aligned calls, and says where the bad run ended.
func TestCompareMissingCallAndShapeJump(t *testing.T) {
	good := write(t, "kapi_100.log", model([]int{4, 1, 1, 1, 1}, false, false, -1), false)
	bad := write(t, "kapi_200.log.gz", model([]int{4, 1, 1, 288}, true, true, -1), true)
	r, err := Compare(good, bad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pairs) != 1 {
		t.Fatalf("%d pairs", len(r.Pairs))
	}
	p := r.Pairs[0]
	if p.A.Pid != 100 || p.B.Pid != 200 {
		t.Errorf("pids %d %d", p.A.Pid, p.B.Pid)
	}
	fd := p.FirstDivergence
	if fd == nil || fd.ACount != 1 || fd.A[0].API != "tiny.qk_norm" || fd.BCount != 0 || fd.After.API != "tiny.qkv_proj" {
		t.Fatalf("first divergence %+v", fd)
	}
	if p.HunksTotal != 4 {
		t.Errorf("%d hunks, want 4 (qk_norm skipped in every pass)", p.HunksTotal)
	}
	if len(p.Missing) != 1 || p.Missing[0] != (Count{"tiny.qk_norm", 5, 0}) {
		t.Errorf("missing %+v", p.Missing)
	}
	j := p.FirstShapeJump()
	if j == nil || j.API != "RMSNorm.forward" || j.A != "(1, 64)" || j.B != "(288, 64)" {
		t.Fatalf("first shape jump %+v", j)
	}
	e := p.End
	if e == nil || e.Side != "b" || e.At.API != "tiny.gate_up" || !e.Unfinished || e.OtherMore != 6 || e.OtherNext[0].API != "tiny.down_proj" {
		t.Fatalf("end %+v", e)
	}
	if r.B.Verdict == nil || r.B.Verdict.Suspect != "tiny.gate_up" {
		t.Errorf("B's verdict %+v", r.B.Verdict)
	}
	var out strings.Builder
	WriteText(&out, r, nil)
	for _, want := range []string{"only in A: tiny.qk_norm", "missing in B: tiny.qk_norm (called 5× in A, never in B)",
		"first shape jump between the runs: RMSNorm.forward arg[0] (1, 64) in A", "B ended at tiny.gate_up", "never returned"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

// At level 5 a statistic that turns NaN in one run is reported for the
// aligned call where it happens, and one that grows 1000× too.
func TestCompareStatistics(t *testing.T) {
	a := write(t, "a.log", model([]int{2, 2, 2}, false, false, -1), false)
	bText := model([]int{2, 2, 2}, false, false, 1)
	bText = strings.Replace(bText, "max=3.000000", "max=3000.000000", 1)
	b := write(t, "b.log", bText, false)
	r, err := Compare(a, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Pairs[0]
	if p.FirstDivergence != nil || p.ArgDiffsTotal != 0 {
		t.Fatalf("same calls, but divergence %+v arg diffs %+v", p.FirstDivergence, p.ArgDiffs)
	}
	var mag, nan bool
	for _, d := range p.StatDiffs {
		switch {
		case d.What == "magnitude" && d.API == "tiny.gate_up" && d.Arg == "return" && strings.Contains(d.B, "max=3000.000000"):
			mag = true
		case d.What == "nonfinite_in_b" && d.API == "tiny.gate_up" && d.Arg == "return" && strings.Contains(d.B, "nan_count=256"):
			nan = true
		}
	}
	if !mag || !nan {
		t.Fatalf("stat diffs %+v", p.StatDiffs)
	}
}

// A window smaller than the runs: the calls before each window are not
// divergences, and the whole-run counts still cover every call.
func TestCompareWindowCut(t *testing.T) {
	a := write(t, "a.log", model([]int{1, 1, 1, 1, 1, 1, 1, 1}, false, false, -1), false)
	b := write(t, "b.log", model([]int{1, 1, 1, 1, 1, 1}, false, false, -1), false)
	r, err := Compare(a, b, Options{Window: 7})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Pairs[0]
	if !p.A.Cut || !p.B.Cut || p.A.Window != 7 {
		t.Fatalf("refs %+v %+v", p.A, p.B)
	}
	if p.FirstDivergence != nil {
		t.Fatalf("divergence %+v", p.FirstDivergence)
	}
	if len(p.CountChanges) != 5 || p.CountChanges[0].A != 8 || p.CountChanges[0].B != 6 {
		t.Fatalf("counts %+v", p.CountChanges)
	}
}

func TestAlign(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"abcabc", "abcabc", "======"},
		{"abcabc", "acac", "=-==-="},
		{"ab", "axb", "=+="},
		{"", "ab", "++"},
		{"abc", "", "---"},
	} {
		tok := func(s string) []int32 {
			t := make([]int32, len(s))
			for i := range s {
				t[i] = int32(s[i])
			}
			return t
		}
		ops, ok := align(tok(c.a), tok(c.b), 100)
		if !ok {
			t.Fatalf("%q %q: not aligned", c.a, c.b)
		}
		var got strings.Builder
		for _, o := range ops {
			got.WriteByte("=-+"[o.kind])
		}
		if got.String() != c.want {
			t.Errorf("%q → %q: %s, want %s", c.a, c.b, got.String(), c.want)
		}
	}
	if _, ok := align([]int32{1, 2, 3, 4}, []int32{5, 6, 7, 8}, 3); ok {
		t.Error("8 edits aligned within 3")
	}
}

// A bundle's kernel-api.log holds one section per process, each after a
// "==> FILE <==" line (with a note when cut): each becomes a process named
// by its file, with the pid from the name, and the processes of the two runs
// pair up by what they called, not by their order.
func TestBundleSectionsPairByCalls(t *testing.T) {
	launcher := "==> /w/sglang_kernel_api_300.log <==\n" + model([]int{1}, false, false, -1)
	launcher = strings.ReplaceAll(strings.ReplaceAll(launcher, "tiny.", "launch."), "RMSNorm", "Tokenizer")
	worker := "==> /w/sglang_kernel_api_301.log (last 100 of 900 bytes) <==\n" + model([]int{4, 1, 288}, true, true, -1)
	col := newCollector(100)
	s := &Side{}
	if err := readSections(strings.NewReader(launcher+worker), col, s, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if len(col.procs) != 2 || col.procs[0].Pid != 300 || col.procs[1].Pid != 301 || col.procs[1].File != "/w/sglang_kernel_api_301.log" {
		for _, p := range col.procs {
			t.Logf("%+v", *p)
		}
		t.Fatalf("%d processes", len(col.procs))
	}
	if s.Calls != col.procs[0].Calls+col.procs[1].Calls || s.Level != 5 {
		t.Fatalf("side %+v", s)
	}
	// The other run has only the worker, as a plain log.
	other := newCollector(100)
	o := &Side{}
	if err := readSections(strings.NewReader(model([]int{4, 1, 1}, false, false, -1)), other, o, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	r := CompareSides(o, s, Options{})
	if len(r.Pairs) != 1 || r.Pairs[0].B.Pid != 301 || len(r.OnlyB) != 1 || r.OnlyB[0].Pid != 300 {
		t.Fatalf("pairs %+v only B %+v", r.Pairs, r.OnlyB)
	}
	if fd := r.Pairs[0].FirstDivergence; fd == nil || fd.A[0].API != "tiny.qk_norm" {
		t.Fatalf("divergence %+v", fd)
	}
}

// Level 1 logs names only: the sequences still align, and the end of the
// shorter run is not called a call that never returned (level 1 logs no
// returns at all).
func TestCompareLevel1(t *testing.T) {
	l1 := func(apis ...string) string {
		var b strings.Builder
		for _, a := range apis {
			b.WriteString(strings.Repeat("=", 80) + "\n[2026-05-02 14:07:31] SGLang Kernel API Call: " + a + "\n")
		}
		return b.String()
	}
	a := write(t, "a.log", l1("norm", "qkv", "qk_norm", "attn", "norm", "qkv", "qk_norm", "attn", "moe"), false)
	b := write(t, "b.log", l1("norm", "qkv", "attn", "norm", "qkv", "attn"), false)
	r, err := Compare(a, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Pairs[0]
	if p.FirstDivergence == nil || p.FirstDivergence.A[0].API != "qk_norm" || p.HunksTotal != 2 {
		t.Fatalf("divergence %+v (%d hunks)", p.FirstDivergence, p.HunksTotal)
	}
	if p.End == nil || p.End.Side != "b" || p.End.Unfinished || p.End.OtherMore != 1 || p.End.OtherNext[0].API != "moe" {
		t.Fatalf("end %+v", p.End)
	}
	var out strings.Builder
	WriteText(&out, r, nil)
	if !strings.Contains(out.String(), "B ended at attn (line 12); A went on with 1 more calls: moe (line 18)") {
		t.Errorf("text:\n%s", out.String())
	}
}
