package server

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kcrash/kcrash/agent/access"
	"github.com/kcrash/kcrash/agent/api"
	"github.com/kcrash/kcrash/agent/journal"
)

// spanlessJournal hands out no spans, as a Journal that does not know
// them: each compact record is then found in its JSON again.
type spanlessJournal struct{ *journal.Journal }

func (j spanlessJournal) ScanNewest(ctx context.Context, since, until time.Time, subjects bool, skip func(boot, subject string) bool, fn func(e *journal.Entry, rec string, sp *api.RecordSpans) bool) error {
	return j.Journal.ScanNewest(ctx, since, until, subjects, skip, func(e *journal.Entry, rec string, _ *api.RecordSpans) bool { return fn(e, rec, nil) })
}

// The compact answer copied from the journal's spans is the bytes of the
// one found again in each record's JSON, for root and for a user, cut by
// the cap or not.
func TestCompactFromSpansSameBytes(t *testing.T) {
	end := time.Now().UTC()
	peers := map[string]access.Peer{
		"root": {},
		"user": {UID: 990, GID: 990, Cgroup: "/user.slice/user-990.slice/session-2.scope"},
	}
	for _, seed := range []uint64{1, 2} {
		j := judgeJournal(t, 3000, end, seed)
		for _, maxRecords := range []int{0, 300} {
			spans := &Server{Journal: j, BootID: bootID, MaxRecords: maxRecords}
			spanless := &Server{Journal: spanlessJournal{j}, BootID: bootID, MaxRecords: maxRecords}
			for name, p := range peers {
				a := query(t, spans, p, end, "", api.FormParam, api.FormCompact)
				b := query(t, spanless, p, end, "", api.FormParam, api.FormCompact)
				if !bytes.Equal(a, b) {
					t.Fatalf("seed %d, cap %d, %s: from the spans\n%.600s\nfound again\n%.600s", seed, maxRecords, name, a, b)
				}
				if !bytes.Contains(a, []byte(`"recs":[[`)) {
					t.Fatalf("seed %d, %s: no records: %.300s", seed, name, a)
				}
			}
		}
	}
}
