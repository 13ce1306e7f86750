package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// compactOf is k's answer in the compact form, as the agent streams it:
// its records from their full JSON (the journal's text) or, with fromRaw
// false, from the records themselves.
func compactOf(k *KmsgResponse, fromRaw bool) []byte {
	head, tail, ok := k.JSONAroundCompact(len(k.Records))
	if !ok {
		panic("JSONAroundCompact refused the answer")
	}
	b := append([]byte(nil), head...)
	for i := range k.Records {
		if i > 0 {
			b = append(b, ',')
		}
		raw := ""
		if fromRaw {
			raw = string(k.Records[i].AppendJSON(nil))
		}
		b = AppendCompact(b, raw, &k.Records[i])
	}
	return append(b, tail...)
}

// The compact form reads back as the records it was written from, by the
// hand reader and by encoding/json alike, and copying a record's full JSON
// writes what encoding the record does.
func TestCompactForm(t *testing.T) {
	for _, k := range answerSeeds {
		if k.Records == nil {
			continue // the full form's null list: an agent answers [] at least
		}
		body := compactOf(&k, true)
		if again := compactOf(&k, false); !bytes.Equal(body, again) {
			t.Errorf("from the full JSON\n%s\nfrom the records\n%s", body, again)
		}
		if !bytes.Contains(body, []byte(fmt.Sprintf(`"count":%d,"recs":[`, len(k.Records)))) {
			t.Errorf("not the compact form: %s", body)
		}
		if !scanKmsgResponse(string(body), new(KmsgResponse)) {
			t.Errorf("the fast path refused %s", body)
		}
		// What encoding/json reads of the full form (invalid UTF-8 made
		// U+FFFD, as the full form is written).
		var want KmsgResponse
		if err := json.Unmarshal(k.AppendJSON(nil), &want); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeKmsgResponse(body)
		if err != nil || !sameAnswer(got, want) {
			t.Errorf("read back %+v (%v)\nwant %+v", got, err, want)
		}
		viaJSON, err := unmarshalKmsgResponse(body)
		if err != nil || !sameAnswer(viaJSON, want) {
			t.Errorf("encoding/json read %+v (%v)\nwant %+v", viaJSON, err, want)
		}
		if full := k.AppendJSON(nil); len(k.Records) > 0 && len(body) >= len(full) {
			t.Errorf("compact %d bytes, full %d", len(body), len(full))
		}
		for i, r := range k.Records {
			c, copied := appendCompact(nil, string(r.AppendJSON(nil)), &r)
			if !copied {
				t.Errorf("the record's JSON %s was encoded again, not copied", r.AppendJSON(nil))
			}
			if back, ok := ParseCompact(string(c)); !ok || back != want.Records[i] {
				t.Errorf("ParseCompact(%s) = %+v %v, want %+v", c, back, ok, want.Records[i])
			}
		}
	}
}

// Whatever a record holds, its compact form from its full JSON is the one
// from the record, and reads back as the record.
func FuzzAppendCompact(f *testing.F) {
	f.Add(uint64(1), int64(5), uint8(3), uint8(0), "amdgpu: page fault \"x\" \\", "")
	f.Add(uint64(1<<63), int64(-1), uint8(7), uint8(1), `a","dict":"b`, "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0")
	f.Add(uint64(0), int64(0), uint8(0), uint8(0), `\`, `","dict":"`)
	f.Fuzz(func(t *testing.T, seq uint64, mono int64, level, fac uint8, text, dict string) {
		r := Record{Seq: seq, Mono: time.Duration(mono), Level: level, Facility: fac, Text: text, Dict: dict}
		fromRecord := AppendCompact(nil, "", &r)
		fromRaw := AppendCompact(nil, string(r.AppendJSON(nil)), &r)
		if !bytes.Equal(fromRaw, fromRecord) {
			t.Fatalf("from the full JSON %s, from the record %s", fromRaw, fromRecord)
		}
		// encoding/json reads it as the full form's record.
		var c compactRecord
		if err := c.UnmarshalJSON(fromRaw); err != nil {
			t.Fatal(err)
		}
		var want Record
		if err := want.unmarshalFull(r.AppendJSON(nil)); err != nil || Record(c) != want {
			t.Fatalf("compact %s read %+v, full read %+v (%v)", fromRaw, Record(c), want, err)
		}
	})
}

// A client asks for the compact form and reads either: an agent that
// knows it answers compact, an older one the full form.
func TestClientReadsEitherForm(t *testing.T) {
	seed := answerSeeds[1]
	var want KmsgResponse
	if err := json.Unmarshal(seed.AppendJSON(nil), &want); err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{"full", "compact"} {
		t.Run(form, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "agent.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			asked := make(chan string, 1)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked <- r.URL.Query().Get(FormParam)
				body := seed.AppendJSON(nil) // an agent of before the compact form
				if form == "compact" {
					body = compactOf(&seed, true)
				}
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.Write(body)
			})}
			go srv.Serve(ln)
			defer srv.Close()
			got, err := New(sock).Kmsg(context.Background(), KmsgQuery{Since: time.Now().Add(-time.Hour)})
			if err != nil || !sameAnswer(got, want) {
				t.Fatalf("got %+v (%v)\nwant %+v", got, err, want)
			}
			if f := <-asked; f != FormCompact {
				t.Errorf("the client asked for form %q", f)
			}
		})
	}
}
