package api

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/kcrash/kcrash/internal/jsonfast"
)

// The compact form of a kmsg answer. A record's JSON repeats its field
// names, a fifth of a flood hour's 4 MB answer, which the agent writes and
// the client reads again for each of 20,000 records. A client that asks
// for the compact form (FormParam=FormCompact) gets the records under
// "recs", after their number ("count"), each as an array in Record's field
// order:
//
//	[seq,mono_ns,level,facility,"text"]  or  [...,"text","dict"]
//
// An agent that does not know the form ignores the parameter and answers
// "records", which the client reads as ever; a client that does not ask
// gets "records" from any agent.
const (
	FormParam   = "form"
	FormCompact = "compact"
)

// AppendCompact appends r in the compact form. raw, when not "", is r's
// JSON as AppendJSON writes it (a journal line's own text of the record,
// which the journal's reader held to that shape): its numbers and strings
// are copied as they are, not formatted or escaped again. Where raw is not
// in that shape, r is encoded.
func AppendCompact(b []byte, raw string, r *Record) []byte {
	b, _ = appendCompact(b, raw, r)
	return b
}

// appendCompact is AppendCompact, saying whether it copied raw.
func appendCompact(b []byte, raw string, r *Record) ([]byte, bool) {
	if out, ok := copyCompact(b, raw, r.Dict != ""); ok {
		return out, true
	}
	b = append(b, '[')
	b = jsonfast.AppendUint(b, r.Seq)
	b = append(b, ',')
	b = jsonfast.AppendInt(b, int64(r.Mono))
	b = append(b, ',')
	b = jsonfast.AppendUint(b, uint64(r.Level))
	b = append(b, ',')
	b = jsonfast.AppendUint(b, uint64(r.Facility))
	b = append(b, ',')
	b = jsonfast.AppendString(b, r.Text)
	if r.Dict != "" {
		b = append(b, ',')
		b = jsonfast.AppendString(b, r.Dict)
	}
	return append(b, ']'), false
}

// AppendCompactSpans is AppendCompact for a raw record that
// ScanRecordSpans read into r and sp: the spans are copied, which writes
// what AppendCompact(b, raw, r) does (FuzzCompactSpans) without finding
// them again.
func AppendCompactSpans(b []byte, raw string, r *Record, sp *RecordSpans) []byte {
	b = append(b, '[')
	for _, n := range sp.Nums {
		b = append(b, raw[n[0]:n[1]]...)
		b = append(b, ',')
	}
	b = append(b, raw[sp.Text[0]:sp.Text[1]]...)
	if r.Dict != "" { // an empty dict written out is left out, as AppendJSON does
		b = append(b, ',')
		b = append(b, raw[sp.Dict[0]:sp.Dict[1]]...)
	}
	return append(b, ']')
}

// copyCompact writes raw's record in the compact form by copying its
// parts: formatting the numbers again cost a flood hour's answer more than
// everything else the agent does with a record.
func copyCompact(b []byte, raw string, dict bool) ([]byte, bool) {
	start := len(b)
	p := jsonfast.Scanner{S: raw}
	b = append(b, '[')
	for _, key := range [...]string{`{"seq":`, `,"mono_ns":`, `,"level":`, `,"facility":`} {
		if !p.Lit(key) {
			return b[:start], false
		}
		// The number runs to the next comma: the journal's reader took
		// it for a JSON integer.
		n := strings.IndexByte(raw[p.I:], ',')
		if n <= 0 {
			return b[:start], false
		}
		b = append(b, raw[p.I:p.I+n+1]...)
		p.I += n
	}
	// The first `","dict":"` after the text's key ends the text: inside a
	// JSON string every '"' follows a backslash.
	const dictKey = `","dict":"`
	if !p.Lit(`,"text":`) || !strings.HasSuffix(raw, `"}`) || p.I >= len(raw)-1 {
		return b[:start], false
	}
	rest := raw[p.I : len(raw)-1]
	switch {
	case dict:
		d := strings.Index(rest, dictKey)
		if d < 0 {
			return b[:start], false
		}
		b = append(b, rest[:d+1]...)
		b = append(b, ',')
		rest = rest[d+len(dictKey)-1:]
	case strings.HasSuffix(rest, `,"dict":""`):
		// An empty dictionary written out (AppendJSON leaves it out): no
		// text ends so, its quotes would be escaped.
		return b[:start], false
	}
	b = append(b, rest...)
	return append(b, ']'), true
}

// scanCompactRecords reads the compact form's list of records, after
// `"recs":`; n is the head's count of them, for the list's capacity (no
// more than the rest of the answer could hold: a record is 12 bytes at
// least).
func scanCompactRecords(p *jsonfast.Scanner, k *KmsgResponse, n int) bool {
	if p.Lit(`null`) {
		return true
	}
	if p.Lit(`[]`) {
		k.Records = []Record{}
		return true
	}
	k.Records = make([]Record, 0, min(n, (len(p.S)-p.I)/12+1))
	var a StrArena
	return p.List(func() bool {
		k.Records = append(k.Records, Record{})
		return scanCompact(p, &k.Records[len(k.Records)-1], &a)
	})
}

// scanCompact reads one record as AppendCompact writes it.
func scanCompact(p *jsonfast.Scanner, r *Record, a *StrArena) bool {
	if !p.Lit(`[`) {
		return false
	}
	seq, ok := scanUint(p, 1<<64-1)
	if !ok || !p.Lit(`,`) {
		return false
	}
	mono, ok := scanInt(p)
	if !ok || !p.Lit(`,`) {
		return false
	}
	level, ok := scanUint(p, 255)
	if !ok || !p.Lit(`,`) {
		return false
	}
	fac, ok := scanUint(p, 255)
	if !ok || !p.Lit(`,`) {
		return false
	}
	text, ok := a.str(p)
	if !ok {
		return false
	}
	var dict string
	if p.Lit(`,`) {
		if dict, ok = a.str(p); !ok {
			return false
		}
	}
	if !p.Lit(`]`) {
		return false
	}
	*r = Record{Seq: seq, Mono: time.Duration(mono), Level: uint8(level), Facility: uint8(fac), Text: text, Dict: dict}
	return true
}

// compactRecord is a record of the compact form as encoding/json reads it.
type compactRecord Record

func (c *compactRecord) UnmarshalJSON(b []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return err
	}
	if len(items) != 5 && len(items) != 6 {
		return errors.New("a compact kernel record has 5 or 6 items")
	}
	var r Record
	var mono int64
	for i, v := range []any{&r.Seq, &mono, &r.Level, &r.Facility, &r.Text, &r.Dict}[:len(items)] {
		if err := json.Unmarshal(items[i], v); err != nil {
			return err
		}
	}
	r.Mono = time.Duration(mono)
	*c = compactRecord(r)
	return nil
}

// unmarshalKmsgResponse reads an answer of either form with
// encoding/json: what the hand reader leaves to it.
func unmarshalKmsgResponse(body []byte) (KmsgResponse, error) {
	var w struct {
		KmsgResponse
		// Only a capacity: the list says how many. Not read, so that a
		// body without "recs" reads as plain JSON reads it, whatever a key
		// that folds to "count" holds.
		Count json.RawMessage  `json:"count"`
		Recs  *[]compactRecord `json:"recs"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return KmsgResponse{}, err
	}
	k := w.KmsgResponse
	if w.Recs != nil {
		k.Records = make([]Record, len(*w.Recs))
		for i, c := range *w.Recs {
			k.Records[i] = Record(c)
		}
	}
	return k, nil
}

// ParseCompact reads one record as AppendCompact writes it; its strings
// may be views of s.
func ParseCompact(s string) (Record, bool) {
	p := jsonfast.Scanner{S: s}
	var r Record
	ok := scanCompact(&p, &r, nil) && p.Done()
	return r, ok
}

// unmarshalFull reads a record's full form with encoding/json (tests
// compare the compact form's reading to it).
func (r *Record) unmarshalFull(b []byte) error { return json.Unmarshal(b, r) }
