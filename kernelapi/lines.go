package kernelapi

// The line grammar of both formats: call headers, sections, exceptions and
// argument lines, read as bytes.

import (
	"bytes"
	"time"
)

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

func isSep(b []byte, c byte) bool {
	if len(b) != 80 {
		return false
	}
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return true
}

// parseTS reads `YYYY-MM-DD HH:MM:SS`.
func parseTS(b []byte) (tsKey, bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[10] != ' ' || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	var v [6]int64
	pos := [6][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}}
	for i, p := range pos {
		n := int64(0)
		for _, c := range b[p[0]:p[1]] {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
		}
		v[i] = n
	}
	if v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60 {
		return 0, false
	}
	return tsKey(((((v[0]*13+v[1])*32+v[2])*24+v[3])*60+v[4])*61 + v[5]), true
}

func (a *analyzer) timeOf(k tsKey) time.Time {
	v := int64(k)
	sec := v % 61
	v /= 61
	mi := v % 60
	v /= 60
	h := v % 24
	v /= 24
	d := v % 32
	v /= 32
	mo := v % 13
	y := v / 13
	return time.Date(int(y), time.Month(mo), int(d), int(h), int(mi), int(sec), 0, a.loc)
}

func (a *analyzer) seeTime(k tsKey) {
	if !a.hasTime {
		a.minKey, a.maxKey, a.hasTime = k, k, true
		return
	}
	a.minKey = min(a.minKey, k)
	a.maxKey = max(a.maxKey, k)
}

const (
	pfxSGCall = "SGLang Kernel API Call: "
	pfxSGExc  = "SGLang Kernel API Exception: "
	pfxFICall = "FlashInfer API Call: "
	pfxFISys  = "FlashInfer API Logging - System Information"
)

// line handles one line; it returns true when the line is the next call's
// header, which ends the current record.
func (s *stream) line(a *analyzer, ln []byte) bool {
	if len(ln) == 0 {
		return false
	}
	if s.excCur != nil && !s.excContinue(a, ln) {
		return false
	}
	switch ln[0] {
	case ' ':
		s.indented(a, ln)
		return false
	case '[':
		if len(ln) < 22 || ln[20] != ']' || ln[21] != ' ' {
			return false
		}
		k, ok := parseTS(ln[1:20])
		if !ok {
			return false
		}
		rest := ln[22:]
		switch {
		case hasPrefix(rest, pfxSGCall):
			s.header(a, fmtSGLang, k, rest[len(pfxSGCall):])
			return true
		case hasPrefix(rest, pfxFICall):
			s.header(a, fmtFlashInfer, k, rest[len(pfxFICall):])
			return true
		case hasPrefix(rest, pfxSGExc):
			a.seeTime(k)
			s.exception(a, k, rest[len(pfxSGExc):])
		case hasPrefix(rest, pfxFISys):
			a.seeTime(k)
			a.formats[fmtFlashInfer] = true
		}
		return false
	case '=':
		if isSep(ln, '=') {
			s.endInputs(a)
			s.setSection(a, sectNone, s.sectFmt)
		}
		return false
	case 'P':
		if string(ln) == "Positional input arguments:" {
			s.beginInputs(a)
		}
		return false
	case 'K':
		if string(ln) == "Keyword input arguments:" {
			s.beginInputs(a)
		}
		return false
	case 'D':
		switch {
		case string(ln) == "Default parameters (not explicitly provided):":
			s.beginInputs(a)
		case hasPrefix(ln, "Dumped inputs to: "):
			s.dumpIn(a, fmtSGLang, ln[len("Dumped inputs to: "):])
		case hasPrefix(ln, "Dumped outputs to: "):
			s.dumpOut(a, fmtSGLang, ln[len("Dumped outputs to: "):])
		}
		return false
	case 'I':
		if hasPrefix(ln, "Inputs dumped to: ") {
			s.dumpIn(a, fmtFlashInfer, ln[len("Inputs dumped to: "):])
		}
		return false
	case 'O':
		switch {
		case string(ln) == "Output:":
			s.beginOutput(a, fmtSGLang)
		case string(ln) == "Output value:":
			s.beginOutput(a, fmtFlashInfer)
		case hasPrefix(ln, "Outputs dumped to: "):
			s.dumpOut(a, fmtFlashInfer, ln[len("Outputs dumped to: "):])
		}
		return false
	case 'T':
		if hasPrefix(ln, "Tensor dump skipped: ") {
			s.level[fmtSGLang] = max(s.level[fmtSGLang], 10)
		}
		return false
	case '(':
		if string(ln) == "(No explicit arguments)" {
			s.endInputs(a)
			s.level[fmtFlashInfer] = max(s.level[fmtFlashInfer], 3)
		}
		return false
	}
	return false
}

func (s *stream) header(a *analyzer, format int, k tsKey, api []byte) {
	s.endRecord(a)
	a.seeTime(k)
	if len(api) > maxAPIName {
		api = api[:maxAPIName]
	}
	s.hasNext = true
	s.nextFmt = format
	s.nextKey, s.nextTS = k, true
	s.nextAPI = append(s.nextAPI[:0], api...)
	s.nextLine = s.lineNo
}

// endRecord runs when the lines of the current call are over.
func (s *stream) endRecord(a *analyzer) {
	s.endExc()
	s.endInputs(a)
	s.closeElem(a)
	s.endOutputs(a)
	s.sect = sectNone
	s.needVal = false
	s.tellCall(a, s.recCall)
}

// tellCall gives the sink a call whose record (header, inputs, dump lines)
// has been read.
func (s *stream) tellCall(a *analyzer, c *callBuf) {
	if a.opts.Calls == nil || c == nil || c.told {
		return
	}
	c.told = true
	a.opts.Calls.Call(c.seq, a.call(s, c))
}

// endOutputs gives the sink the return of the call whose outputs were read.
func (s *stream) endOutputs(a *analyzer) {
	c := s.outCall
	if a.opts.Calls == nil || s.sect != sectOut || c == nil || c.toldOut {
		return
	}
	s.tellCall(a, c)
	c.toldOut = true
	var outs []Arg
	if c.nOut > 0 {
		outs = make([]Arg, c.nOut)
		for i := 0; i < c.nOut; i++ {
			outs[i] = argOf(&c.out[i])
		}
	}
	a.opts.Calls.Return(c.seq, outs, string(c.exc))
}

func (s *stream) setSection(a *analyzer, sect, format int) {
	s.closeElem(a)
	s.endOutputs(a)
	s.sect, s.sectFmt = sect, format
	s.needVal = false
	s.topKey = s.topKey[:0]
}

func (s *stream) beginInputs(a *analyzer) {
	c := s.recCall
	if c == nil {
		s.setSection(a, sectNone, s.lastFmt)
		return
	}
	s.setSection(a, sectIn, c.format)
	s.inCall = c
	s.level[c.format] = max(s.level[c.format], 3)
}

// endInputs is where a call's input shapes are compared with the previous call
// of the same API: every input line has been read by then.
func (s *stream) endInputs(a *analyzer) {
	c := s.inCall
	if c == nil {
		return
	}
	s.closeElem(a)
	s.inCall = nil
	if s.sect == sectIn {
		s.sect = sectNone
	}
	defer s.release(c)
	sh := s.apis[string(c.api)]
	if sh == nil {
		if a.apis >= maxAPIs {
			return
		}
		a.apis++
		sh = &apiShapes{}
		s.apis[string(c.api)] = sh
	}
	n := 0
	for i := 0; i < c.nIn; i++ {
		e := &c.in[i]
		if len(e.shape) == 0 {
			continue
		}
		for j := 0; j < sh.n; j++ {
			if bytes.Equal(sh.names[j], e.name) {
				if !bytes.Equal(sh.shapes[j], clip(e.shape, maxShape)) {
					a.addJump(s, c, e.name, sh.shapes[j], e.shape)
				}
				break
			}
		}
	}
	// Only the previous call counts, so the stored set is replaced.
	for i := 0; i < c.nIn && n < maxArgs; i++ {
		e := &c.in[i]
		if len(e.shape) == 0 {
			continue
		}
		sh.names[n] = append(sh.names[n][:0], e.name...)
		sh.shapes[n] = append(sh.shapes[n][:0], clip(e.shape, maxShape)...)
		n++
	}
	sh.n = n
}

func (s *stream) beginOutput(a *analyzer, format int) {
	s.endInputs(a)
	s.closeElem(a)
	// An inner call's outputs end where its caller's begin.
	s.endOutputs(a)
	s.sect = sectNone
	s.level[format] = max(s.level[format], 3)
	c := s.pop(format)
	old := s.outCall
	s.outCall = c
	s.release(old)
	if c != nil {
		c.finished = true
		a.ended(c)
	}
	s.setSection(a, sectOut, format)
	if c == nil {
		// Output of a call opened before the file starts (a rotated or
		// truncated log): nothing to attach it to.
		s.sect = sectNone
	}
}

func (s *stream) dumpIn(a *analyzer, format int, dir []byte) {
	s.endInputs(a)
	s.level[format] = max(s.level[format], 10)
	dir = clip(dir, maxField*4)
	if s.pid == 0 {
		s.pid = pidFromDumpDir(dir)
	}
	if format == fmtFlashInfer {
		s.pendingFIDump = append(s.pendingFIDump[:0], dir...)
		return
	}
	if c := s.stacks[format].top(); c != nil {
		c.dumpDir = append(c.dumpDir[:0], dir...)
	}
}

func (s *stream) dumpOut(a *analyzer, format int, dir []byte) {
	s.endInputs(a)
	s.level[format] = max(s.level[format], 10)
	dir = clip(dir, maxField*4)
	if c := s.outCall; c != nil && bytes.Equal(c.dumpDir, dir) {
		c.dumpDone = true
		return
	}
	st := &s.stacks[format]
	for i := 0; i < st.n; i++ {
		if c := st.at(i); bytes.Equal(c.dumpDir, dir) {
			c.dumpDone = true
			return
		}
	}
}

// exception handles `[ts] SGLang Kernel API Exception: <name> (<Type>: <msg>`.
func (s *stream) exception(a *analyzer, k tsKey, rest []byte) {
	s.endInputs(a)
	s.closeElem(a)
	s.endOutputs(a)
	s.sect = sectNone
	a.formats[fmtSGLang] = true
	s.level[fmtSGLang] = max(s.level[fmtSGLang], 1)
	name, text := rest, []byte(nil)
	if i := bytes.Index(rest, []byte(" (")); i >= 0 {
		name, text = rest[:i], rest[i+2:]
	}
	name = clip(name, maxAPIName)
	typ := text
	if i := bytes.Index(text, []byte(": ")); i >= 0 {
		typ = text[:i]
	} else if n := len(typ); n > 0 && typ[n-1] == ')' {
		typ = typ[:n-1]
	}
	closed := false
	if n := len(text); n > 0 && text[n-1] == ')' {
		text, closed = text[:n-1], true
	}
	text = clip(text, maxExcBytes)

	// The wrapper that raised is the innermost open call of that name; the
	// calls above it were left by the same exception.
	st := &s.stacks[fmtSGLang]
	var c *callBuf
	for i := 0; i < st.n; i++ {
		if bytes.Equal(st.at(i).api, name) {
			for j := 0; j < i; j++ {
				s.release(s.pop(fmtSGLang))
			}
			c = s.pop(fmtSGLang)
			break
		}
	}
	if c != nil {
		c.exc = append(c.exc[:0], clip(firstLine(text), maxField)...)
		if a.opts.Calls != nil && !c.toldOut {
			s.tellCall(a, c)
			c.toldOut = true
			a.opts.Calls.Return(c.seq, nil, string(c.exc))
		}
		if len(c.dumpDir) > 0 && !c.dumpDone {
			a.addDump(DumpDir{Path: string(c.dumpDir), API: string(c.api), State: "exception", Source: "log"})
		}
		a.ended(c)
		s.release(c)
	}

	a.rep.ExceptionsTotal++
	t := a.timeOf(k)
	e := Exception{API: string(name), Type: string(clip(typ, 128)), Text: string(text),
		File: s.name, Line: int(s.lineNo), Pid: s.pid, Time: &t}
	if len(a.excFirst) < maxExcFirst {
		a.excFirst = append(a.excFirst, e)
		s.excCur = &a.excFirst[len(a.excFirst)-1]
	} else {
		n := a.rep.ExceptionsTotal - maxExcFirst - 1
		slot := &a.excLast[n%maxExcLast]
		*slot = e
		s.excCur = slot
	}
	s.excLines = 1
	if closed {
		s.excCur = nil
	}
}

// excContinue takes the lines of a multi-line exception message; it returns
// true when ln is not part of the message and must be handled as usual.
func (s *stream) excContinue(a *analyzer, ln []byte) bool {
	if isSep(ln, '=') {
		s.excCur = nil
		return true
	}
	if ln[0] == '[' && len(ln) >= 22 && ln[20] == ']' {
		if _, ok := parseTS(ln[1:20]); ok {
			s.excCur = nil
			return true
		}
	}
	closed := false
	if n := len(ln); ln[n-1] == ')' {
		ln, closed = ln[:n-1], true
	}
	if s.excLines < maxExcLines && len(s.excCur.Text)+len(ln) < maxExcBytes && (len(ln) > 0 || !closed) {
		s.excCur.Text += "\n" + string(ln)
		s.excLines++
	}
	if closed {
		s.excCur = nil
	}
	return false
}

func (s *stream) endExc() { s.excCur = nil }

// ---------------------------------------------------------------------------
// Argument lines. SGLang: `  key=<first line>`, tensor fields at 6 spaces (12
// inside containers), items `[i] …`. FlashInfer: `  arg[i]:` / `  name=` /
// `  name= [DEFAULT]` with the value on the next lines, outputs at 2 spaces,
// items `[i]: …`. Indentation beyond "2 or more than 2" is not relied on:
// multi-line repr values can spill anywhere.

func (s *stream) indented(a *analyzer, ln []byte) {
	if s.sect == sectNone {
		return
	}
	n := 0
	for n < len(ln) && ln[n] == ' ' {
		n++
	}
	body := ln[n:]
	if len(body) == 0 {
		return
	}
	if len(body) == 1 && (body[0] == ')' || body[0] == ']' || body[0] == '}') {
		s.closeElem(a)
		return
	}
	if n == 2 {
		if s.sectFmt == fmtSGLang {
			eq := bytes.IndexByte(body, '=')
			if eq <= 0 {
				return
			}
			s.setTop(a, body[:eq])
			s.value(a, s.topKey, body[eq+1:])
			return
		}
		// FlashInfer
		if s.sect == sectOut {
			s.setTop(a, retName)
			s.value(a, s.topKey, body)
			return
		}
		switch {
		case body[len(body)-1] == ':':
			s.setTop(a, body[:len(body)-1])
		case bytes.HasSuffix(body, []byte("= [DEFAULT]")):
			s.setTop(a, body[:len(body)-len("= [DEFAULT]")])
		case body[len(body)-1] == '=':
			s.setTop(a, body[:len(body)-1])
		default:
			return
		}
		s.needVal = true
		return
	}
	if s.needVal {
		s.needVal = false
		s.value(a, s.topKey, body)
		return
	}
	switch body[0] {
	case '[':
		if len(body) > 1 && body[1] >= '0' && body[1] <= '9' {
			s.item(a, body)
			return
		}
		s.bracketStats(a, body)
		return
	case '\'':
		// SGLang dict item: 'key': <first line>
		if i := bytes.Index(body, []byte("': ")); i > 0 {
			s.nameBuf = append(append(append(append(s.nameBuf[:0], s.topKey...), '['), body[:i+1]...), ']')
			s.value(a, s.nameBuf, body[i+3:])
		}
		return
	}
	s.field(a, body)
}

var retName = []byte("return")

func (s *stream) setTop(a *analyzer, key []byte) {
	s.closeElem(a)
	s.topKey = append(s.topKey[:0], clip(key, 64)...)
	s.needVal = false
}

// item handles `[i] <first line>` (SGLang) and `[i]: <first line>` (FlashInfer).
func (s *stream) item(a *analyzer, body []byte) {
	j := bytes.IndexByte(body, ']')
	if j < 0 || j > 12 {
		return
	}
	rest := body[j+1:]
	if len(rest) > 0 && rest[0] == ':' {
		rest = rest[1:]
	}
	rest = bytes.TrimLeft(rest, " ")
	s.nameBuf = append(append(s.nameBuf[:0], s.topKey...), body[:j+1]...)
	s.value(a, s.nameBuf, rest)
}

// value starts an element from the first line of a value.
func (s *stream) value(a *analyzer, name, v []byte) {
	s.closeElem(a)
	if len(v) == 0 {
		return
	}
	switch {
	case string(v) == "(" || string(v) == "[" || string(v) == "{":
		return // a container: its items become elements
	case string(v) == "Tensor(":
		e := s.newElem(name)
		if e != nil {
			e.typ = append(e.typ, "Tensor"...)
		}
	case v[len(v)-1] == '(' && isIdent(v[:len(v)-1]):
		e := s.newElem(name)
		if e != nil {
			e.typ = append(e.typ, clip(v[:len(v)-1], 64)...)
		}
	default:
		e := s.newElem(name)
		if e != nil {
			e.value = append(e.value, clip(v, maxField)...)
			s.closeElem(a)
		}
	}
}

func isIdent(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !(c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (s *stream) newElem(name []byte) *elemBuf {
	var e *elemBuf
	switch s.sect {
	case sectIn:
		c := s.inCall
		if c == nil || c.nIn == maxArgs {
			return nil
		}
		e = &c.in[c.nIn]
		c.nIn++
	case sectOut:
		c := s.outCall
		if c == nil || c.nOut == maxOut {
			return nil
		}
		e = &c.out[c.nOut]
		c.nOut++
	default:
		return nil
	}
	e.reset()
	e.name = append(e.name, name...)
	s.cur = e
	return e
}

func (s *stream) field(a *analyzer, body []byte) {
	e := s.cur
	if e == nil {
		return
	}
	eq := bytes.IndexByte(body, '=')
	if eq <= 0 || eq > 16 {
		return
	}
	v := body[eq+1:]
	switch string(body[:eq]) {
	case "shape":
		e.shape = append(e.shape[:0], clip(v, maxField)...)
	case "dtype":
		e.dtype = append(e.dtype[:0], clip(v, 64)...)
	case "device":
		e.device = append(e.device[:0], clip(v, 64)...)
	case "stride":
		e.stride = append(e.stride[:0], clip(v, maxField)...)
	case "repr":
		e.value = append(e.value[:0], clip(v, maxField)...)
	case "min":
		s.stat(&e.min, v)
	case "max":
		s.stat(&e.max, v)
	case "mean":
		s.stat(&e.mean, v)
	case "nan_count":
		s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
		e.nan = atoi(v)
	case "inf_count":
		s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
		e.inf = atoi(v)
	case "statistics":
		s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
		v = bytes.TrimSuffix(bytes.TrimPrefix(v, []byte("[")), []byte("]"))
		e.stats = append(e.stats[:0], clip(v, 128)...)
		e.statsBad = hasPrefix(v, "unavailable")
	}
}

func (s *stream) stat(dst *[]byte, v []byte) {
	s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
	*dst = append((*dst)[:0], clip(v, 32)...)
}

// bracketStats handles FlashInfer's `[statistics error: …]`,
// `[statistics skipped: …]` and `[stats deferred to GPU kernel: …]`.
func (s *stream) bracketStats(a *analyzer, body []byte) {
	e := s.cur
	if e == nil || !hasPrefix(body, "[stat") {
		return
	}
	s.level[s.sectFmt] = max(s.level[s.sectFmt], 5)
	v := bytes.TrimSuffix(body[1:], []byte("]"))
	e.stats = append(e.stats[:0], clip(v, 128)...)
	e.statsBad = hasPrefix(v, "statistics error")
}

func atoi(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		if n > (1<<62)/10 {
			return n
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// closeElem ends the element being read: only now are all its fields known.
func (s *stream) closeElem(a *analyzer) {
	e := s.cur
	if e == nil {
		return
	}
	s.cur = nil
	if e.nan <= 0 && e.inf <= 0 && !e.statsBad {
		return
	}
	c := s.inCall
	if s.sect == sectOut {
		c = s.outCall
	}
	if c == nil {
		return
	}
	if e.nan > 0 || e.inf > 0 {
		a.rep.NonfiniteTensors++
		if a.rep.FirstNonfinite == nil {
			a.rep.FirstNonfinite = &NonfiniteTensor{Call: a.call(s, c), Arg: argOf(e)}
			a.watch[0] = c
		}
	}
	if e.statsBad && a.rep.FirstStatsUnavailable == nil {
		a.rep.FirstStatsUnavailable = &NonfiniteTensor{Call: a.call(s, c), Arg: argOf(e)}
		a.watch[1] = c
	}
}
