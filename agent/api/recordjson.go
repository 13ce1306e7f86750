package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/kcrash/kcrash/internal/jsonfast"
)

// AppendJSON appends r as encoding/json writes it (HTML escaping off).
// The journal writes each line's record so, and the agent's answer is
// these records one after the other: a flood's hour answers 20,000 of
// them, which reflection made dear on both ends.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"seq":`...)
	b = jsonfast.AppendUint(b, r.Seq)
	b = append(b, `,"mono_ns":`...)
	b = jsonfast.AppendInt(b, int64(r.Mono))
	b = append(b, `,"level":`...)
	b = jsonfast.AppendUint(b, uint64(r.Level))
	b = append(b, `,"facility":`...)
	b = jsonfast.AppendUint(b, uint64(r.Facility))
	b = append(b, `,"text":`...)
	b = jsonfast.AppendString(b, r.Text)
	if r.Dict != "" {
		b = append(b, `,"dict":`...)
		b = jsonfast.AppendString(b, r.Dict)
	}
	return append(b, '}')
}

// ScanRecord reads a Record in exactly the shape AppendJSON writes; false
// for anything else, which encoding/json must read instead.
func ScanRecord(p *jsonfast.Scanner, r *Record) bool {
	return ScanRecordSpans(p, r, false, nil, nil)
}

// RecordSpans says where a record's JSON, as ScanRecordSpans read it,
// holds its fields: the four numbers' digits, then its text and its dict
// with their quotes (the dict's empty when the record has none). The
// compact form is these spans copied (AppendCompactSpans), without
// looking for them again.
type RecordSpans struct {
	Nums       [4][2]int32
	Text, Dict [2]int32
}

// ScanRecordSpans is ScanRecord, noting where the fields are in sp when
// sp is not nil. trusted: the text was written by AppendJSON (the
// journal's own lines), so its strings are taken without checking for
// control characters or invalid UTF-8, which AppendJSON never writes
// (a string with an escape is read by the validating reader all the same).
// Where the strings are valid, the two readings agree
// (TestTrustedRecordAgrees, FuzzTrustedRecord); where they are not, only a
// validating reader says so. Strings with escapes are unescaped into a
// (nil: each allocated).
func ScanRecordSpans(p *jsonfast.Scanner, r *Record, trusted bool, sp *RecordSpans, a *StrArena) bool {
	start := p.I
	var nums [4]uint64
	var ends [4]int
	for i, key := range recordKeys {
		if !p.Lit(key) {
			return false
		}
		var ok bool
		switch i {
		case 0:
			nums[i], ok = scanUint(p, 1<<64-1)
		case 1:
			var v int64
			v, ok = scanInt(p)
			nums[i] = uint64(v)
		default:
			nums[i], ok = scanUint(p, 255)
		}
		if !ok {
			return false
		}
		ends[i] = p.I
	}
	if !p.Lit(`,"text":`) {
		return false
	}
	textAt := p.I
	text, ok := str(p, trusted, a)
	if !ok {
		return false
	}
	textEnd := p.I
	var dict string
	dictAt, dictEnd := p.I, p.I
	if p.Lit(`,"dict":`) {
		dictAt = p.I
		if dict, ok = str(p, trusted, a); !ok {
			return false
		}
		dictEnd = p.I
	}
	if !p.Lit(`}`) {
		return false
	}
	*r = Record{Seq: nums[0], Mono: time.Duration(int64(nums[1])), Level: uint8(nums[2]), Facility: uint8(nums[3]), Text: text, Dict: dict}
	if sp != nil {
		at := start
		for i, key := range recordKeys {
			at += len(key)
			sp.Nums[i] = [2]int32{int32(at - start), int32(ends[i] - start)}
			at = ends[i]
		}
		sp.Text = [2]int32{int32(textAt - start), int32(textEnd - start)}
		sp.Dict = [2]int32{int32(dictAt - start), int32(dictEnd - start)}
	}
	return true
}

// scanUint is jsonfast's Scanner.Uint (FuzzScanUint holds them to the
// same), its loop on local copies of the scanner's text and index: the
// method's, through the pointer, loaded them again for each digit, and a
// flood hour's answer is 80,000 numbers read by the agent and again by
// the client.
func scanUint(p *jsonfast.Scanner, limit uint64) (uint64, bool) {
	s, i := p.S, p.I
	start := i
	var v uint64
	// Nineteen digits cannot overflow a uint64.
	for end := min(len(s), start+19); i < end; i++ {
		c := s[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + uint64(c)
	}
	if v > limit {
		return 0, false
	}
	for ; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			break
		}
		if v > (limit-uint64(c))/10 {
			return 0, false
		}
		v = v*10 + uint64(c)
	}
	if n := i - start; n == 0 || n > 1 && s[start] == '0' {
		return 0, false
	}
	p.I = i
	return v, true
}

// scanInt is jsonfast's Scanner.Int on scanUint.
func scanInt(p *jsonfast.Scanner) (int64, bool) {
	at := p.I
	neg := p.I < len(p.S) && p.S[p.I] == '-'
	if neg {
		p.I++
	}
	v, ok := scanUint(p, 1<<63-1)
	if !ok {
		p.I = at
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

var recordKeys = [4]string{`{"seq":`, `,"mono_ns":`, `,"level":`, `,"facility":`}

// str reads a JSON string; trusted, one without a backslash before its
// closing quote is taken as it is (see ScanRecordSpans).
func str(p *jsonfast.Scanner, trusted bool, a *StrArena) (string, bool) {
	if trusted && p.I < len(p.S) && p.S[p.I] == '"' {
		start := p.I + 1
		if q := strings.IndexByte(p.S[start:], '"'); q >= 0 && strings.IndexByte(p.S[start:start+q], '\\') < 0 {
			p.I = start + q + 1
			return p.S[start : start+q], true
		}
	}
	return a.str(p)
}

// AppendTime appends t as encoding/json writes a time.Time; false for a
// time it refuses (a year outside 0-9999).
func AppendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// scanTime reads a time as AppendTime writes it.
func scanTime(p *jsonfast.Scanner) (time.Time, bool) {
	s, ok := p.RawStr()
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// AppendJSON appends the answer as encoding/json writes it (HTML escaping
// off), followed by a newline.
func (k *KmsgResponse) AppendJSON(b []byte) []byte {
	b, _ = k.appendJSON(b, nil, `,"records":`)
	return b
}

// JSONAround is the answer's JSON around its records' items: head ends
// with `"records":[`, tail starts with its `]`, and the records, as
// AppendJSONRaw takes them, go between, separated by commas (k.Records is
// not looked at). False where the answer needs encoding/json (a time it
// cannot write by hand): AppendJSONRaw writes that one. A server streams a
// large answer so instead of building it in one buffer.
func (k *KmsgResponse) JSONAround() (head, tail []byte, ok bool) {
	return k.jsonAround(`,"records":`)
}

// JSONAroundCompact is JSONAround for the compact form (FormCompact): the
// n records, as AppendCompact writes them, go between head and tail. The
// head says n ("count"), so that a reader makes its list once.
func (k *KmsgResponse) JSONAroundCompact(n int) (head, tail []byte, ok bool) {
	return k.jsonAround(`,"count":` + strconv.Itoa(n) + `,"recs":`)
}

func (k *KmsgResponse) jsonAround(key string) (head, tail []byte, ok bool) {
	b, at := k.appendJSON(nil, []string{}, key)
	if at < 0 {
		return nil, nil, false
	}
	return b[:at], b[at:], true
}

// AppendJSONRaw is AppendJSON with the records given as their JSON text, in
// order, instead of k.Records (each as Record.AppendJSON writes it, or any
// JSON text of a Record): an answer copies the record text of the
// journal's lines instead of decoding and encoding it again.
func (k *KmsgResponse) AppendJSONRaw(b []byte, records []string) []byte {
	if records == nil {
		records = []string{}
	}
	b, _ = k.appendJSON(b, records, `,"records":`)
	return b
}

// appendJSON appends the answer, with raw as its records when not nil
// (under key, `,"records":` or the compact form's `,"recs":`), and says
// where raw's items begin (-1 where encoding/json wrote it, always in the
// full form).
func (k *KmsgResponse) appendJSON(b []byte, raw []string, key string) ([]byte, int) {
	start := len(b)
	fallback := func() ([]byte, int) {
		kk := *k
		if raw != nil {
			kk.Records = make([]Record, len(raw))
			for i, r := range raw {
				json.Unmarshal([]byte(r), &kk.Records[i])
			}
		}
		out, _ := json.Marshal(&kk)
		return append(append(b[:start], out...), '\n'), -1
	}
	b = append(b, `{"boot_id":`...)
	b = jsonfast.AppendString(b, k.BootID)
	b = append(b, `,"boot_time":`...)
	var ok bool
	if b, ok = AppendTime(b, k.BootTime); !ok {
		return fallback()
	}
	b = append(b, key...)
	at := -1
	switch {
	case raw != nil:
		b = append(b, '[')
		at = len(b)
		for i, r := range raw {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, r...)
		}
		b = append(b, ']')
	case k.Records == nil:
		b = append(b, "null"...)
	default:
		b = append(b, '[')
		for i := range k.Records {
			if i > 0 {
				b = append(b, ',')
			}
			b = k.Records[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	if len(k.Gaps) > 0 {
		b = append(b, `,"gaps":[`...)
		for i, g := range k.Gaps {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"from":`...)
			b = jsonfast.AppendUint(b, g.From)
			b = append(b, `,"to":`...)
			b = jsonfast.AppendUint(b, g.To)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"withheld":`...)
	b = jsonfast.AppendInt(b, int64(k.Withheld))
	if !k.JournalStart.IsZero() {
		b = append(b, `,"journal_start":`...)
		if b, ok = AppendTime(b, k.JournalStart); !ok {
			return fallback()
		}
	}
	if len(k.Notes) > 0 {
		b = append(b, `,"notes":[`...)
		for i, n := range k.Notes {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonfast.AppendString(b, n)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...), at
}

// DecodeKmsgResponse reads an answer: the shape AppendJSON writes by hand,
// anything else through encoding/json. The records' strings are views of
// body, which the caller must not change afterwards: a flood's answer is
// megabytes, and copying it was a good part of reading it.
func DecodeKmsgResponse(body []byte) (KmsgResponse, error) {
	var k KmsgResponse
	if scanKmsgResponse(unsafe.String(unsafe.SliceData(body), len(body)), &k) {
		return k, nil
	}
	return unmarshalKmsgResponse(body)
}

func scanKmsgResponse(s string, k *KmsgResponse) bool {
	p := jsonfast.Scanner{S: s}
	var ok bool
	if !p.Lit(`{"boot_id":`) {
		return false
	}
	if k.BootID, ok = p.Str(); !ok || !p.Lit(`,"boot_time":`) {
		return false
	}
	if k.BootTime, ok = scanTime(&p); !ok {
		return false
	}
	if p.Lit(`,"count":`) {
		n, ok := p.Uint(1<<31 - 1)
		if !ok || !p.Lit(`,"recs":`) || !scanCompactRecords(&p, k, int(n)) {
			return false
		}
	} else if !p.Lit(`,"records":`) {
		return false
	} else {
		switch {
		case p.Lit(`null`):
		case p.Lit(`[]`):
			k.Records = []Record{}
		default:
			// Records are about 200 bytes of JSON: one allocation, near enough.
			k.Records = make([]Record, 0, (len(s)-p.I)/160+1)
			var a StrArena
			ok := p.List(func() bool {
				k.Records = append(k.Records, Record{})
				return ScanRecordSpans(&p, &k.Records[len(k.Records)-1], false, nil, &a)
			})
			if !ok {
				return false
			}
		}
	}
	if p.Lit(`,"gaps":`) {
		ok := p.List(func() bool {
			var g Gap
			if !p.Lit(`{"from":`) {
				return false
			}
			if g.From, ok = p.Uint(1<<64 - 1); !ok || !p.Lit(`,"to":`) {
				return false
			}
			if g.To, ok = p.Uint(1<<64 - 1); !ok || !p.Lit(`}`) {
				return false
			}
			k.Gaps = append(k.Gaps, g)
			return true
		})
		if !ok {
			return false
		}
	}
	if !p.Lit(`,"withheld":`) {
		return false
	}
	w, ok := p.Int()
	if !ok || w != int64(int(w)) {
		return false
	}
	k.Withheld = int(w)
	if p.Lit(`,"journal_start":`) {
		if k.JournalStart, ok = scanTime(&p); !ok {
			return false
		}
	}
	if p.Lit(`,"notes":`) {
		ok := p.List(func() bool {
			n, ok := p.Str()
			k.Notes = append(k.Notes, n)
			return ok
		})
		if !ok {
			return false
		}
	}
	if !p.Lit("}") {
		return false
	}
	p.Lit("\n")
	return p.Done()
}
