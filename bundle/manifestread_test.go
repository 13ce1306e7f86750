package bundle

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A manifest's lists and maps are kept up to their limits, the rest left
// out with a note; its small fields and a triage of any shape read as
// json.Unmarshal reads them.
func TestDecodeManifestBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"schema_version":1,"mode":"run","cwd":"/w","exit":{"code":3},"env":{"profiles":["p"],"set":{"A":"1"},"user":{`)
	for i := range 50000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"V%d":"%s"`, i, strings.Repeat("v", 50))
	}
	b.WriteString(`}},"triage":{"verdict":{"kind":"gpu_fault"},"findings":[`)
	for i := range 50000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"kind":"x","text":"finding %d %s"}`, i, strings.Repeat("f", 50))
	}
	b.WriteString(`]},"notes":[`)
	for i := range 50000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"note %d"`, i)
	}
	b.WriteString(`]}`)
	var m Manifest
	if err := DecodeManifest([]byte(b.String()), &m); err != nil {
		t.Fatal(err)
	}
	if m.SchemaVersion != 1 || m.Mode != "run" || m.Cwd != "/w" || m.Exit.Code == nil || *m.Exit.Code != 3 || m.Env.Set["A"] != "1" || len(m.Env.Profiles) != 1 {
		t.Errorf("small fields: %+v", m)
	}
	if n := len(m.Env.User); n == 0 || n > listKeptItems {
		t.Errorf("env.user: %d kept", n)
	}
	var tri struct {
		Verdict  struct{ Kind string }
		Findings []json.RawMessage
	}
	if err := json.Unmarshal(m.Triage, &tri); err != nil || tri.Verdict.Kind != "gpu_fault" || len(tri.Findings) == 0 || len(m.Triage) > findingsKept+64<<10 {
		t.Errorf("triage: %v, kind %q, %d findings, %d bytes", err, tri.Verdict.Kind, len(tri.Findings), len(m.Triage))
	}
	say := strings.Join(m.Notes[len(m.Notes)-3:], "\n")
	for _, want := range []string{"env.user entries", "triage findings", "notes"} {
		if !strings.Contains(say, want) {
			t.Errorf("no note of %s left out: %q", want, say)
		}
	}
	for _, tri := range []string{`null`, `"a string"`, `[1,[2]]`, `{}`, `{"findings":null}`} {
		var m Manifest
		if err := DecodeManifest([]byte(`{"schema_version":1,"triage":`+tri+`,"notes":null}`), &m); err != nil {
			t.Errorf("triage %s: %v", tri, err)
		}
		if len(m.Triage) == 0 || m.Notes != nil {
			t.Errorf("triage %s: read as %s, notes %q", tri, m.Triage, m.Notes)
		}
	}
	if err := DecodeManifest([]byte(`{"schema_version":1,"cwd":"`+strings.Repeat("x", manifestValueMax+256<<10)+`"}`), &m); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a 4 MiB cwd: %v", err)
	}
}
