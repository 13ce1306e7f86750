package collectors

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// amd-smi's text layouts change between ROCm releases; every one the corpus
// holds is read here: `amd-smi metric` (indented KEY: value blocks with a
// MEM_USAGE block), `amd-smi process` (the same style, PROCESS_INFO
// blocks), `amd-smi monitor` tables (VRAM_USED/VRAM_TOTAL columns in 6.x,
// one "0.2/ 25.4 GB" VRAM_USAGE column in 7.1) with the PROCESS INFO table
// of `monitor -q`, and the 7.0 default view (a boxed table much like
// nvidia-smi's, with a Processes box). A Python traceback instead of output
// (amd-smi monitor on guests before 7.1) is a problem, never zero usage.

var (
	amdGPUHeadRe = regexp.MustCompile(`^GPU:\s*(\d+)\s*$`)
	amdKVRe      = regexp.MustCompile(`^(\s*)([A-Z][A-Z0-9_]*):\s*(.*?)\s*$`)
	// "| 0000:0c:00.0    AMD Instinct MI300X | 13 % ..."
	amdBoxBusRe = regexp.MustCompile(`^\|\s*([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*?)\s*\|`)
	// "|   0       0       2        SPX/NPS1 | 98 %       N/A          4976/196592 MB |"
	amdBoxMemRe = regexp.MustCompile(`^\|\s*(\d+)\s.*\|.*?([\d.]+)\s*/\s*([\d.]+)\s*([KMGT]?i?B)\s*\|\s*$`)
	amdSizeRe   = regexp.MustCompile(`([\d.]+)\s*([KMGT]?i?B)\b`)
	amdErrRe    = regexp.MustCompile(`^(Traceback|[A-Za-z]*Error\b|ERROR\b|AMDSMI_STATUS_)|[Pp]ermission denied`)
)

// amdUnits are tokens amd-smi prints apart from their number ("283 MB").
var amdUnits = map[string]bool{"B": true, "KB": true, "MB": true, "GB": true, "TB": true, "KiB": true, "MiB": true, "GiB": true,
	"W": true, "mW": true, "°C": true, "C": true, "%": true, "MHz": true, "GHz": true, "ns": true, "us": true, "ms": true,
	"Mb/s": true, "MB/s": true, "GB/s": true, "mV": true, "V": true, "J": true, "GT/s": true, "RPM": true}

// amdTokens splits a table row into cells: a unit joins the number before
// it, and "0.2/" joins what follows.
func amdTokens(line string) []string {
	var out []string
	for _, f := range strings.Fields(strings.Trim(strings.TrimSpace(line), "|")) {
		if n := len(out); n > 0 && (amdUnits[f] || strings.HasSuffix(out[n-1], "/")) {
			out[n-1] += " " + f
			continue
		}
		out = append(out, f)
	}
	return out
}

type amdTable struct {
	cols   []string
	box    bool
	procs  bool
	vramIx int // which memory value of a process row is VRAM
}

func amdTableHeader(line string) (*amdTable, bool) {
	t := strings.TrimSpace(line)
	box := strings.HasPrefix(t, "|")
	t = strings.TrimSpace(strings.Trim(t, "|"))
	if !strings.HasPrefix(t, "GPU ") {
		return nil, false
	}
	cols := strings.Fields(t)
	tab := &amdTable{box: box}
	has := func(c string) bool {
		for _, x := range cols {
			if x == c {
				return true
			}
		}
		return false
	}
	switch {
	case has("PID"):
		tab.procs = true
		var merged []string
		for i := 0; i < len(cols); i++ {
			if cols[i] == "Process" && i+1 < len(cols) && cols[i+1] == "Name" {
				merged = append(merged, "NAME")
				i++
				continue
			}
			merged = append(merged, cols[i])
		}
		cols = merged
		mem := 0
		tab.vramIx = -1
		for _, c := range cols {
			if strings.HasSuffix(c, "_MEM") || c == "MEM_USAGE" {
				if c == "VRAM_MEM" {
					tab.vramIx = mem
				}
				mem++
			}
		}
	case has("VRAM_USED") || has("VRAM_TOTAL") || has("VRAM_USAGE"):
	default:
		return nil, false
	}
	tab.cols = cols
	return tab, true
}

func (t *amdTable) row(line string) (*GPUMem, *gpuProcEntry, bool) {
	toks := amdTokens(line)
	if len(toks) == 0 {
		return nil, nil, false
	}
	gpu, err := strconv.Atoi(toks[0])
	if err != nil {
		return nil, nil, false
	}
	if t.procs {
		p := &gpuProcEntry{GPU: strconv.Itoa(gpu), Where: "amd-smi"}
		plain := strings.Fields(strings.Trim(strings.TrimSpace(line), "|"))
		for i, c := range t.cols {
			if i >= len(plain) {
				break
			}
			switch c {
			case "PID":
				p.Pid, _ = strconv.Atoi(plain[i])
			case "NAME":
				p.Name = plain[i]
			}
		}
		if p.Pid <= 0 {
			return nil, nil, false
		}
		if sizes := amdSizeRe.FindAllString(line, -1); t.vramIx >= 0 && t.vramIx < len(sizes) {
			p.Used = gpuParseSize(sizes[t.vramIx], 1<<20)
		}
		return nil, p, true
	}
	if len(toks) != len(t.cols) {
		return nil, nil, false
	}
	g := &GPUMem{Index: gpu, Vendor: "amd", Source: "amd-smi"}
	for i, c := range t.cols {
		v := toks[i]
		switch c {
		case "VRAM_USED":
			g.UsedBytes = gpuParseSize(v, 1<<20)
		case "VRAM_TOTAL":
			g.TotalBytes = gpuParseSize(v, 1<<20)
		case "VRAM_USAGE":
			used, total, ok := strings.Cut(v, "/")
			if !ok {
				continue
			}
			g.TotalBytes = gpuParseSize(total, 1<<20)
			// The unit is printed once, after the total.
			unit := strings.TrimLeft(strings.TrimSpace(total), "0123456789.")
			g.UsedBytes = gpuParseSize(strings.TrimSpace(used)+unit, 1<<20)
		}
	}
	return g, nil, true
}

// parseAMDSMI reads any amd-smi text output it recognises; see above.
func parseAMDSMI(out []byte) ([]GPUMem, []gpuProcEntry, []string) {
	text := strings.ReplaceAll(string(out), "\r\n", "\n")
	var gpus []GPUMem
	var procs []gpuProcEntry
	var problems []string
	byIdx := map[int]int{}
	gpuAt := func(n int) *GPUMem {
		i, ok := byIdx[n]
		if !ok {
			gpus = append(gpus, GPUMem{Index: n, Vendor: "amd", Source: "amd-smi"})
			i = len(gpus) - 1
			byIdx[n] = i
		}
		return &gpus[i]
	}

	cur := -1              // GPU of the current "GPU: N" block
	var pend *gpuProcEntry // PROCESS_INFO being read
	flush := func() {
		if pend != nil && pend.Pid > 0 {
			procs = append(procs, *pend)
		}
		pend = nil
	}
	var tab *amdTable
	boxGPU := -1 // index in gpus of the default-view GPU whose second row comes next
	var boxBus, boxName string
	for _, line := range strings.Split(text, "\n") {
		trim := strings.TrimSpace(line)
		if trim == "" {
			tab = nil
			continue
		}
		if amdErrRe.MatchString(trim) {
			problems = append(problems, gpuClip(trim))
			continue
		}
		if m := amdGPUHeadRe.FindStringSubmatch(trim); m != nil {
			flush()
			cur, _ = strconv.Atoi(m[1])
			tab = nil
			continue
		}
		if t, ok := amdTableHeader(line); ok {
			flush()
			tab, cur = t, -1
			continue
		}
		if tab != nil {
			if g, p, ok := tab.row(line); ok {
				if g != nil {
					e := gpuAt(g.Index)
					e.UsedBytes, e.TotalBytes = g.UsedBytes, g.TotalBytes
				}
				if p != nil {
					procs = append(procs, *p)
				}
				continue
			}
			if !tab.box {
				tab = nil
			}
		}
		if m := amdBoxBusRe.FindStringSubmatch(line); m != nil {
			boxBus, boxName, boxGPU = gpuNormBusID(m[1]), m[2], 0
			continue
		}
		if boxGPU == 0 {
			boxGPU = -1
			if m := amdBoxMemRe.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				g := gpuAt(n)
				g.BusID, g.Name = boxBus, boxName
				g.UsedBytes = gpuParseSize(m[2]+" "+m[4], 1<<20)
				g.TotalBytes = gpuParseSize(m[3]+" "+m[4], 1<<20)
				continue
			}
		}
		if cur < 0 {
			continue
		}
		m := amdKVRe.FindStringSubmatch(line)
		if m == nil {
			continue // a wrapped list ("N/A, N/A,") or an elision ("...")
		}
		key, val := m[2], m[3]
		switch {
		case strings.HasPrefix(key, "PROCESS_INFO"):
			flush()
			if val == "" {
				pend = &gpuProcEntry{GPU: strconv.Itoa(cur), Where: "amd-smi"}
			}
		case key == "TOTAL_VRAM":
			gpuAt(cur).TotalBytes = gpuParseSize(val, 1<<20)
		case key == "USED_VRAM":
			gpuAt(cur).UsedBytes = gpuParseSize(val, 1<<20)
		case pend != nil && key == "PID":
			pend.Pid, _ = strconv.Atoi(val)
		case pend != nil && key == "NAME":
			pend.Name = val
		case pend != nil && key == "VRAM_MEM":
			pend.Used = gpuParseSize(val, 1<<20)
		}
	}
	flush()
	// A GPU block without MEM_USAGE (an excerpt, or a metric call without
	// --mem-usage) says nothing about VRAM.
	kept := gpus[:0]
	for _, g := range gpus {
		if g.UsedBytes != nil || g.TotalBytes != nil {
			kept = append(kept, g)
		}
	}
	gpus = kept
	if len(gpus) == 0 && len(procs) == 0 && len(problems) == 0 && strings.TrimSpace(text) != "" {
		problems = append(problems, fmt.Sprintf("no VRAM figures in amd-smi output; first line: %q", gpuClip(gpuFirstLine(out))))
	}
	return gpus, procs, problems
}
