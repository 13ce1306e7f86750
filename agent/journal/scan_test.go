package journal

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/api"
)

// ScanNewest reads a quoting text into the chunk of the line before it,
// and the line starts of each block into one list: it still hands out
// what QueryNewest, which keeps every string it gives, hands out.
func TestScanNewestEqualsQueryNewest(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, 600) // every text quotes, a dict in five has newlines
	j, err := Open(dir, Limits{MaxBytes: 64 << 20, SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	var want []Entry
	if err := j.QueryNewest(ctx, time.Time{}, time.Time{}, func(e *Entry) bool {
		want = append(want, noEmpty(*e))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	var got []Entry
	if err := j.ScanNewest(ctx, time.Time{}, time.Time{}, true, nil, func(e *Entry, _ string, _ *api.RecordSpans) bool {
		x := noEmpty(*e)
		x.Boot = strings.Clone(e.Boot)
		x.Rec.Text, x.Rec.Dict = strings.Clone(e.Rec.Text), strings.Clone(e.Rec.Dict)
		x.Subject = noEmpty(Entry{Subject: *e.Subject.clone()}).Subject
		got = append(got, x)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) < 600 {
		t.Fatalf("ScanNewest %d entries, QueryNewest %d", len(got), len(want))
	}
	quoted := 0
	for i := range want {
		if !sameEntry(got[i], want[i]) || !reflect.DeepEqual(got[i].Subject, want[i].Subject) {
			t.Fatalf("entry %d:\n%+v\nwant %+v", i, got[i], want[i])
		}
		if strings.Contains(want[i].Rec.Text, `"q"`) {
			quoted++
		}
	}
	if quoted < 600 {
		t.Fatalf("%d texts unescaped", quoted)
	}
}
