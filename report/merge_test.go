package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/merge"
)

// mergeFixture is four ranks of one job over 100 s: rank 2 faults at +40 s,
// the others time out in the collective a minute later.
func mergeFixture() *merge.Result {
	t0 := time.Date(2026, 5, 2, 13, 0, 0, 0, time.UTC)
	sig := "SIGABRT"
	r := &merge.Result{}
	for i := 0; i < 4; i++ {
		n := i
		rk := &merge.Rank{Rank: &n, Host: "node" + string(rune('a'+i)), Bundle: "b/kcrash-r" + string(rune('0'+i)) + ".tar.gz",
			Exit: bundle.Exit{Signal: &sig}, Start: t0, End: t0.Add(100 * time.Second), Verdict: "collective_timeout", Secondary: true}
		ft := t0.Add(100 * time.Second)
		if i == 2 {
			ft = t0.Add(40 * time.Second)
			rk.Verdict, rk.Secondary, rk.Summary = "gpu_illegal_memory_access", false, "Xid 13 <b>on</b> GPU 3"
		}
		rk.FirstEvidenceTime = &ft
		r.Ranks = append(r.Ranks, rk)
		r.Timeline = append(r.Timeline, merge.Event{Time: ft, Rank: &n, Host: rk.Host, Kind: rk.Verdict, Source: "log", Text: "evidence of rank " + string(rune('0'+i))})
	}
	two := 2
	ff := t0.Add(40 * time.Second)
	r.FirstFailure = &merge.FirstFailure{Rank: &two, Host: "nodec", Bundle: "b/kcrash-r2.tar.gz", Time: &ff, Verdict: "gpu_illegal_memory_access"}
	return r
}

func TestWriteMerge(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMerge(&buf, mergeFixture()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`data-timeline="ranks"`, `<g class="rank first" data-rank="2">`, `<g class="firstfail" data-t="40000">`, "Xid 13 &lt;b&gt;on&lt;/b&gt; GPU 3"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if n := strings.Count(page, `class="rank secondary"`); n != 3 {
		t.Errorf("%d secondary ranks drawn, want 3", n)
	}
}
