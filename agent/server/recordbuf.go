package server

import (
	"bufio"
	"sync"
	"unsafe"

	"github.com/kcrash/kcrash/agent/api"
)

// recordBuf holds the JSON of an answer's records, newest first, in
// chunks: a flood hour's answer is megabytes, which one growing buffer
// copied and zeroed again at each doubling.
type recordBuf struct {
	chunks [][]byte
	recs   []recRef
	bytes  int
}

type recRef struct{ chunk, off, end int32 }

const chunkSize = 256 << 10

var chunks = sync.Pool{New: func() any { b := make([]byte, 0, chunkSize); return &b }}

// refLists are recordBuf's lists of records, used again: a flood hour's
// answer grew one to 20,000 records, copying it at each doubling.
var refLists sync.Pool

// add appends a record: rec, its JSON when the journal had it, else r
// encoded; in the compact form (api.AppendCompact) when compact, from
// rec's spans where the journal said where its fields are.
func (b *recordBuf) add(rec string, spans *api.RecordSpans, r *api.Record, compact bool) {
	need := len(rec)
	if rec == "" {
		need = len(r.Text) + len(r.Dict) + 128
	}
	if compact {
		need += 60 // the numbers written again, at most
	}
	k := len(b.chunks) - 1
	if k < 0 || cap(b.chunks[k])-len(b.chunks[k]) < need {
		c := (*chunks.Get().(*[]byte))[:0]
		if cap(c) < need {
			c = make([]byte, 0, need)
		}
		b.chunks = append(b.chunks, c)
		k++
	}
	c := b.chunks[k]
	off := len(c)
	if compact && rec != "" && spans != nil {
		c = api.AppendCompactSpans(c, rec, r, spans)
	} else if compact {
		c = api.AppendCompact(c, rec, r)
	} else if rec != "" {
		c = append(c, rec...)
	} else {
		c = r.AppendJSON(c)
	}
	b.chunks[k] = c
	if b.recs == nil {
		if l, ok := refLists.Get().(*[]recRef); ok {
			b.recs = (*l)[:0]
		}
	}
	b.recs = append(b.recs, recRef{chunk: int32(k), off: int32(off), end: int32(len(c))})
	b.bytes += len(c) - off
}

func (b *recordBuf) len() int { return len(b.recs) }

// size is the length of the records' JSON list items with their commas.
func (b *recordBuf) size() int { return b.bytes + max(len(b.recs)-1, 0) }

func (b *recordBuf) rec(i int) string {
	r := b.recs[i]
	c := b.chunks[r.chunk][r.off:r.end]
	return unsafe.String(unsafe.SliceData(c), len(c))
}

// strings are the records oldest first, as views of the chunks.
func (b *recordBuf) strings() []string {
	out := make([]string, len(b.recs))
	for i := range b.recs {
		out[len(out)-1-i] = b.rec(i)
	}
	return out
}

// writeOldestFirst writes the records oldest first, separated by commas.
func (b *recordBuf) writeOldestFirst(w *bufio.Writer) {
	for i := len(b.recs) - 1; i >= 0; i-- {
		if i < len(b.recs)-1 {
			w.WriteByte(',')
		}
		w.WriteString(b.rec(i))
	}
}

// release gives the chunks back; the records' strings are gone with them.
func (b *recordBuf) release() {
	for _, c := range b.chunks {
		if cap(c) == chunkSize {
			c = c[:0]
			chunks.Put(&c)
		}
	}
	if b.recs != nil {
		l := b.recs[:0]
		refLists.Put(&l)
	}
	b.chunks, b.recs = nil, nil
}
