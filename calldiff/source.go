package calldiff

// Reading one side: a kcrash bundle (its kernel-api.log, one section per
// process, and its verdict) or a kernel-API log file, plain or gzipped.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/software"
	"github.com/kcrash/kcrash/triage"
)

// Side is one of the two runs compared.
type Side struct {
	Path      string     `json:"path"`
	Kind      string     `json:"kind"` // "bundle" or "log"
	Format    string     `json:"format"`
	Level     int        `json:"level"`
	Calls     int64      `json:"calls"`
	Verdict   *Verdict   `json:"verdict"`
	Processes []*Process `json:"processes"`
	Warnings  []string   `json:"warnings,omitempty"`
	// Software is a bundle's software.json (nil for a log, or a bundle from
	// before the software collector).
	Software *software.Report `json:"-"`
}

// Verdict is the run's triage verdict and the call it suspects: a bundle's
// own, or for a bare log what triage makes of the log alone.
type Verdict struct {
	Kind       string `json:"kind"`
	Confidence string `json:"confidence"`
	Summary    string `json:"summary"`
	Suspect    string `json:"suspect,omitempty"`
	FromLog    bool   `json:"from_log_only,omitempty"`
}

// read loads one side with windows of the given size.
func read(path string, window int, maxLog int64) (*Side, error) {
	f, err := bundle.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	isBundle, err := looksLikeBundle(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if isBundle {
		return readBundle(path, window)
	}
	return readLog(path, window, maxLog)
}

// looksLikeBundle: a gzip stream whose content starts with a tar header.
func looksLikeBundle(f *os.File) (bool, error) {
	br := bufio.NewReader(f)
	magic, _ := br.Peek(2)
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return false, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return false, fmt.Errorf("gzip: %v", err)
	}
	var hdr [512]byte
	if _, err := io.ReadFull(zr, hdr[:]); err != nil {
		return false, nil
	}
	return string(hdr[257:262]) == "ustar", nil
}

func readLog(path string, window int, maxLog int64) (*Side, error) {
	col := newCollector(window)
	rep, err := kernelapi.Options{Calls: col, SkipDumpCheck: true, MaxDecompressed: maxLog}.Analyze([]string{path})
	if err != nil {
		return nil, err
	}
	s := &Side{Path: path, Kind: "log", Format: rep.Format, Level: rep.Level, Calls: rep.Calls,
		Processes: col.procs, Warnings: rep.Warnings}
	res := triage.Decide(triage.Input{KernelAPI: rep})
	s.Verdict = &Verdict{Kind: string(res.Verdict.Kind), Confidence: res.Verdict.Confidence,
		Summary: res.Verdict.Summary, Suspect: triage.SuspectAPI(res), FromLog: true}
	return s, nil
}

// maxSoftware bounds the software.json a side reads: a real one is tens of
// KiB, and its decoding is several times its size.
const maxSoftware = 2 << 20

func readBundle(path string, window int) (*Side, error) {
	col := newCollector(window)
	s := &Side{Path: path, Kind: "bundle"}
	formats := map[string]bool{}
	var sw []byte
	swLarge := false
	visit := func(name string, r io.Reader) error {
		switch name {
		case "software.json":
			var err error
			sw, err = io.ReadAll(io.LimitReader(r, maxSoftware+1))
			if len(sw) > maxSoftware {
				sw, swLarge = nil, true
			}
			return err
		case "kernel-api.log":
			return readSections(r, col, s, formats)
		}
		return nil
	}
	b, err := bundle.Scan(path, visit)
	if err != nil {
		return nil, err
	}
	switch {
	case len(formats) > 1 || formats["mixed"]:
		s.Format = "mixed"
	case formats["sglang"]:
		s.Format = "sglang"
	case formats["flashinfer"]:
		s.Format = "flashinfer"
	}
	if swLarge {
		s.Warnings = append(s.Warnings, fmt.Sprintf("software.json is larger than %d MiB, more than any real one; no software to compare", maxSoftware>>20))
	}
	if sw != nil {
		var rep software.Report
		if json.Unmarshal(sw, &rep) == nil {
			s.Software = &rep
		} else {
			s.Warnings = append(s.Warnings, "software.json is not readable; no software to compare")
		}
	}
	var res triage.Result
	if len(b.Manifest.Triage) > 0 && json.Unmarshal(b.Manifest.Triage, &res) == nil {
		s.Verdict = &Verdict{Kind: string(res.Verdict.Kind), Confidence: res.Verdict.Confidence,
			Summary: res.Verdict.Summary, Suspect: triage.SuspectAPI(res)}
	}
	return s, nil
}

// readSections analyses each process's section of a bundle's
// kernel-api.log in turn.
func readSections(r io.Reader, col *collector, s *Side, formats map[string]bool) error {
	sp := newSplitter(r)
	for {
		sec, ok := sp.next()
		if !ok {
			break
		}
		col.base = col.maxSeq
		rep, err := kernelapi.Options{Calls: col, SkipDumpCheck: true}.AnalyzeReaders(
			[]kernelapi.NamedReader{{Name: sec.name, Reader: sec}})
		sec.drain()
		if err != nil {
			s.Warnings = append(s.Warnings, err.Error())
			continue
		}
		s.Calls += rep.Calls
		s.Level = max(s.Level, rep.Level)
		if rep.Format != "" {
			formats[rep.Format] = true
		}
		s.Warnings = append(s.Warnings, rep.Warnings...)
	}
	s.Processes = col.procs
	return sp.err
}

// splitter cuts a bundle's kernel-api.log at the "==> FILE <==" lines the
// collector writes between the files of several processes.
type splitter struct {
	br      *bufio.Reader
	name    string // the next section's name
	started bool
	done    bool
	err     error
}

func newSplitter(r io.Reader) *splitter {
	return &splitter{br: bufio.NewReaderSize(r, 64<<10), name: "kernel-api.log"}
}

type section struct {
	sp    *splitter
	name  string
	buf   []byte
	bol   bool // at the beginning of a line
	ended bool
}

func (sp *splitter) next() (*section, bool) {
	if sp.done {
		return nil, false
	}
	if !sp.started {
		sp.started = true
		// The first line may already be a header.
		if b, _ := sp.br.Peek(4); string(b) == "==> " {
			line, err := sp.br.ReadSlice('\n')
			if name, ok := header(line); ok {
				sp.name = name
			}
			if err != nil {
				sp.done = true
				return nil, false
			}
		}
	}
	return &section{sp: sp, name: sp.name, bol: true}, true
}

// header reads "==> NAME <==" or "==> NAME (last N of M bytes) <==".
func header(line []byte) (string, bool) {
	l := strings.TrimRight(string(line), "\r\n")
	if !strings.HasPrefix(l, "==> ") || !strings.HasSuffix(l, " <==") {
		return "", false
	}
	name := l[4 : len(l)-4]
	if i := strings.LastIndex(name, " (last "); i > 0 && strings.HasSuffix(name, " bytes)") {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ": "); i > 0 {
		// "==> FILE: error <==": the file could not be read.
		name = name[:i]
	}
	return name, true
}

func (s *section) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.ended {
			return 0, io.EOF
		}
		line, err := s.sp.br.ReadSlice('\n')
		if s.bol && len(line) > 4 && bytes.HasPrefix(line, []byte("==> ")) {
			if name, ok := header(line); ok {
				s.sp.name = name
				s.ended = true
				if err != nil && err != bufio.ErrBufferFull {
					s.sp.done = true
				}
				return 0, io.EOF
			}
		}
		s.bol = err == nil
		s.buf = line
		if err != nil && err != bufio.ErrBufferFull {
			s.ended, s.sp.done = true, true
			if err != io.EOF {
				s.sp.err = err
			}
			if len(line) == 0 {
				return 0, io.EOF
			}
		}
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// drain reads the rest of a section the analyzer did not.
func (s *section) drain() {
	var b [4096]byte
	for {
		if _, err := s.Read(b[:]); err != nil {
			return
		}
	}
}
