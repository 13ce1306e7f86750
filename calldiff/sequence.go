package calldiff

// The call sequence of one process as the diff keeps it: every API's count
// over the whole run, and the last Window calls with their arguments.

import "github.com/kcrash/kcrash/kernelapi"

// maxAPIs bounds the distinct API names counted per process; calls of any
// further name are counted under otherAPI. Real servers have a few hundred.
const (
	maxAPIs  = 4096
	otherAPI = "(other APIs)"
)

// Entry is one call in a process's window.
type Entry struct {
	Seq      int64           `json:"-"`
	API      string          `json:"api"`
	Line     int             `json:"line"`
	Args     []kernelapi.Arg `json:"args,omitempty"`
	Outputs  []kernelapi.Arg `json:"outputs,omitempty"`
	Returned bool            `json:"returned"`
	Exc      string          `json:"exception,omitempty"`
}

// Process is one process's calls: one kernel-API log file, or one section of
// a bundle's kernel-api.log.
type Process struct {
	File   string           `json:"file"`
	Pid    int              `json:"pid,omitempty"`
	Calls  int64            `json:"calls"`
	Counts map[string]int64 `json:"-"`
	// Returns counts the calls seen returning: none at level 1, which logs no
	// returns, so there a call without one says nothing.
	Returns int64 `json:"-"`

	ring  []Entry
	start int // index of the oldest entry in ring once it is full
	open  map[int64]int
	names map[string]string // interned API names
}

func newProcess(file string, window int) *Process {
	return &Process{File: file, Counts: map[string]int64{}, ring: make([]Entry, 0, min(window, 4096)),
		open: map[int64]int{}, names: map[string]string{}}
}

// Window returns the kept calls, oldest first.
func (p *Process) Window() []Entry {
	if p.start == 0 {
		return p.ring
	}
	out := make([]Entry, 0, len(p.ring))
	out = append(out, p.ring[p.start:]...)
	return append(out, p.ring[:p.start]...)
}

// Cut reports whether calls before the window were dropped.
func (p *Process) Cut() bool { return p.Calls > int64(len(p.ring)) }

func (p *Process) intern(s string) string {
	if v, ok := p.names[s]; ok {
		return v
	}
	if len(p.names) >= maxAPIs {
		return s
	}
	p.names[s] = s
	return s
}

func (p *Process) add(window int, seq int64, c kernelapi.Call) {
	p.Calls++
	api := p.intern(c.API)
	if _, ok := p.Counts[api]; ok || len(p.Counts) < maxAPIs {
		p.Counts[api]++
	} else {
		p.Counts[otherAPI]++
	}
	if p.Pid == 0 {
		p.Pid = c.Pid
	}
	e := Entry{Seq: seq, API: api, Line: c.Line, Args: c.Args, Exc: c.Exception, Returned: c.Exception != ""}
	if e.Returned {
		p.Returns++
	}
	var i int
	if len(p.ring) < window {
		p.ring = append(p.ring, e)
		i = len(p.ring) - 1
	} else {
		i = p.start
		delete(p.open, p.ring[i].Seq)
		p.ring[i] = e
		p.start = (p.start + 1) % window
	}
	if !e.Returned {
		p.open[seq] = i
	}
}

func (p *Process) ret(seq int64, outs []kernelapi.Arg, exc string) {
	i, ok := p.open[seq]
	if !ok {
		return
	}
	delete(p.open, seq)
	p.Returns++
	e := &p.ring[i]
	e.Returned, e.Outputs = true, outs
	if exc != "" {
		e.Exc = exc
	}
}

// collector is the kernelapi.CallSink of one analysis: calls go to the
// process of their file.
type collector struct {
	window int
	procs  []*Process
	byFile map[string]*Process
	bySeq  map[int64]*Process // calls waiting for their return
	// Each analysis numbers its calls from 1; base keeps the numbers of
	// sections analysed one after the other apart.
	base, maxSeq int64
}

func newCollector(window int) *collector {
	return &collector{window: window, byFile: map[string]*Process{}, bySeq: map[int64]*Process{}}
}

func (c *collector) Call(seq int64, call kernelapi.Call) {
	seq += c.base
	c.maxSeq = max(c.maxSeq, seq)
	p := c.byFile[call.File]
	if p == nil {
		p = newProcess(call.File, c.window)
		c.byFile[call.File] = p
		c.procs = append(c.procs, p)
	}
	p.add(c.window, seq, call)
	if _, open := p.open[seq]; open {
		c.bySeq[seq] = p
	}
	if len(c.bySeq) > 4*c.window {
		// Level-1 logs never return: forget the waits the windows dropped.
		for s, q := range c.bySeq {
			if _, ok := q.open[s]; !ok {
				delete(c.bySeq, s)
			}
		}
	}
}

func (c *collector) Return(seq int64, outs []kernelapi.Arg, exc string) {
	seq += c.base
	p := c.bySeq[seq]
	if p == nil {
		return
	}
	delete(c.bySeq, seq)
	p.ret(seq, outs, exc)
}
