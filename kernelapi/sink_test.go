package kernelapi

import (
	"fmt"
	"strings"
	"testing"
)

type recSink struct {
	calls []string
	rets  map[int64]string
	seqs  []int64
}

func (r *recSink) Call(seq int64, c Call) {
	shape := ""
	if len(c.Args) > 0 {
		shape = c.Args[0].Shape
	}
	r.calls = append(r.calls, fmt.Sprintf("%s%s@%d", c.API, shape, c.Line))
	r.seqs = append(r.seqs, seq)
}

func (r *recSink) Return(seq int64, outs []Arg, exc string) {
	s := exc
	for _, o := range outs {
		s += o.Name + o.Shape
	}
	r.rets[seq] = s
}

// The sink hears every call in log order, with its inputs, and each return
// with its outputs: nested calls (the inner one returns first, the outer's
// Output follows without a separator), an exception, and a call that never
// returned.
func TestCallSink(t *testing.T) {
	sep := strings.Repeat("=", 80)
	log := strings.Join([]string{
		sep,
		"[2026-05-02 14:21:09] SGLang Kernel API Call: outer",
		"Positional input arguments:",
		"  arg[0]=Tensor(",
		"      shape=(4, 8)",
		"      dtype=torch.float32",
		"    )",
		sep,
		"[2026-05-02 14:21:09] SGLang Kernel API Call: inner",
		"Positional input arguments:",
		"  arg[0]=Tensor(",
		"      shape=(4, 2)",
		"    )",
		"Output:",
		"  return=Tensor(",
		"      shape=(4, 3)",
		"    )",
		"Output:",
		"  return=Tensor(",
		"      shape=(4, 9)",
		"    )",
		sep,
		"[2026-05-02 14:21:10] SGLang Kernel API Call: raises",
		"[2026-05-02 14:21:10] SGLang Kernel API Exception: raises (RuntimeError: boom",
		"second line)",
		sep,
		"[2026-05-02 14:21:10] SGLang Kernel API Call: dies",
		"Positional input arguments:",
		"  arg[0]=Tensor(",
		"      shape=(288, 8)",
		"    )",
		"",
	}, "\n")
	r := &recSink{rets: map[int64]string{}}
	rep, err := Options{Calls: r, SkipDumpCheck: true}.AnalyzeReaders([]NamedReader{{Name: "k_5.log", Reader: strings.NewReader(log)}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"outer(4, 8)@2", "inner(4, 2)@9", "raises@23", "dies(288, 8)@27"}
	if strings.Join(r.calls, " ") != strings.Join(want, " ") {
		t.Fatalf("calls %v, want %v", r.calls, want)
	}
	rets := map[string]string{}
	for i, s := range r.seqs {
		if v, ok := r.rets[s]; ok {
			rets[strings.FieldsFunc(want[i], func(r rune) bool { return r == '(' || r == '@' })[0]] = v
		}
	}
	if rets["outer"] != "return(4, 9)" || rets["inner"] != "return(4, 3)" || rets["raises"] != "RuntimeError: boom" {
		t.Fatalf("returns %v", rets)
	}
	if _, ok := rets["dies"]; ok || len(r.rets) != 3 {
		t.Fatalf("%d returns: %v", len(r.rets), r.rets)
	}
	if rep.UnfinishedCall == nil || rep.UnfinishedCall.API != "dies" {
		t.Fatalf("report changed: unfinished %+v", rep.UnfinishedCall)
	}
}
