package kernelapi

// Level-10 dump directories. The log says which dirs got no outputs line; the
// directory's own metadata, when it is reachable from here, is authoritative:
// SGLang rewrites metadata.json in place, FlashInfer appends to metadata.jsonl.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

type dumpMeta struct {
	FunctionName    string `json:"function_name"`
	ExecutionStatus string `json:"execution_status"`
}

func readDumpMeta(dir string) (dumpMeta, bool) {
	var m dumpMeta
	for _, name := range []string{"metadata.json", "metadata.jsonl"} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes))
		f.Close()
		if err != nil {
			continue
		}
		if name == "metadata.jsonl" {
			b = bytes.TrimRight(b, "\n\r ")
			if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
				b = b[i+1:]
			}
		}
		if json.Unmarshal(b, &m) == nil && m.ExecutionStatus != "" {
			return m, true
		}
	}
	return m, false
}

func (a *analyzer) checkDumps() {
	rep := a.rep
	if !a.opts.SkipDumpCheck {
		kept := rep.DumpDirs[:0]
		for _, d := range rep.DumpDirs {
			if m, ok := a.findDumpMeta(d.Path); ok {
				d.Source = "metadata"
				d.State = m.ExecutionStatus
				if m.FunctionName != "" {
					d.API = m.FunctionName
				}
				if d.State != "inputs_saved" && d.State != "exception" {
					continue
				}
			}
			kept = append(kept, d)
		}
		rep.DumpDirs = kept
	}
	for _, root := range a.opts.DumpRoots {
		ents, err := os.ReadDir(root)
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("dump root: %v", err))
			continue
		}
		if len(ents) > maxDumpScan {
			// Names start with the time, so the last ones are the newest.
			ents = ents[len(ents)-maxDumpScan:]
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			dir := filepath.Join(root, e.Name())
			m, ok := readDumpMeta(dir)
			if !ok || (m.ExecutionStatus != "inputs_saved" && m.ExecutionStatus != "exception") {
				continue
			}
			if a.knownDump(dir) {
				continue
			}
			a.addDump(DumpDir{Path: dir, API: m.FunctionName, State: m.ExecutionStatus, Source: "metadata"})
		}
	}
}

// findDumpMeta resolves a dir named in the log: as written (absolute, or
// relative to the current directory), then relative to each log file's
// directory and each dump root.
func (a *analyzer) findDumpMeta(p string) (dumpMeta, bool) {
	if m, ok := readDumpMeta(p); ok {
		return m, true
	}
	if filepath.IsAbs(p) {
		for _, root := range a.opts.DumpRoots {
			if m, ok := readDumpMeta(filepath.Join(root, filepath.Base(p))); ok {
				return m, true
			}
		}
		return dumpMeta{}, false
	}
	for _, s := range a.streams {
		if s.name == "-" {
			continue
		}
		if m, ok := readDumpMeta(filepath.Join(filepath.Dir(s.name), p)); ok {
			return m, true
		}
	}
	for _, root := range a.opts.DumpRoots {
		if m, ok := readDumpMeta(filepath.Join(root, filepath.Base(p))); ok {
			return m, true
		}
	}
	return dumpMeta{}, false
}

func (a *analyzer) knownDump(dir string) bool {
	base := filepath.Base(dir)
	for _, d := range a.rep.DumpDirs {
		if d.Path == dir || filepath.Base(d.Path) == base {
			return true
		}
	}
	return false
}
