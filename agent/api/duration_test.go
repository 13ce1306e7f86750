package api

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(JournalStats{MaxAge: Duration(7 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		MaxAge json.RawMessage `json:"max_age"`
	}
	if err := json.Unmarshal(b, &back); err != nil || string(back.MaxAge) != `"168h0m0s"` {
		t.Fatalf("max_age = %s (%v), want \"168h0m0s\"", back.MaxAge, err)
	}
	var st JournalStats
	if err := json.Unmarshal(b, &st); err != nil || time.Duration(st.MaxAge) != 7*24*time.Hour {
		t.Fatalf("read back %v (%v)", time.Duration(st.MaxAge), err)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`1500000000`), &d); err != nil || time.Duration(d) != 1500*time.Millisecond {
		t.Errorf("nanoseconds: %v (%v)", time.Duration(d), err)
	}
	for _, bad := range []string{`"soon"`, `true`, `"1x"`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
