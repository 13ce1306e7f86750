package collectors

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// rocm-smi key names for VRAM, in its JSON and CSV output.
const (
	rocmTotalKey = "VRAM Total Memory (B)"
	rocmUsedKey  = "VRAM Total Used Memory (B)"
	// A patched rocm-smi (rocm_smi_lib#120) prints these instead; its
	// "available" is the card's total (17163091968 on an RX 6800, the same
	// number the CSV gives as VRAM Total Memory).
	rocmUseKey   = "GPU memory use"
	rocmAvailKey = "GPU memory available"
	rocmPctKey   = "GPU memory use (%)"
)

var (
	rocmPlainRe = regexp.MustCompile(`^GPU\[(\d+)\]\s*:\s*(VRAM Total Memory \(B\)|VRAM Total Used Memory \(B\)):\s*(\S+)`)
	// "ERROR: GPU[0] \t\t: Unable to get GPU memory use." (tabs as printed)
	rocmErrRe  = regexp.MustCompile(`^(?:ERROR:\s*)?GPU\[(\d+)\]\s*:\s*(Unable to .*|.*[Ee]rror.*)$`)
	rocmCardRe = regexp.MustCompile(`^card(\d+)$`)
)

// parseROCmSMI reads `rocm-smi --showmeminfo vram` output as JSON, CSV or
// the plain "GPU[N] : ..." lines, whichever it is. A line before the JSON
// (the echoed command in the corpus) is tolerated. Only byte counts make a
// GPU's VRAM known; a percentage alone is kept as such, and "Unable to get
// GPU memory use" is a problem, never a zero.
func parseROCmSMI(out []byte) ([]GPUMem, []string) {
	text := strings.ReplaceAll(string(out), "\r\n", "\n")
	if i := strings.Index(text, "{"); i >= 0 {
		if gpus, problems, ok := parseROCmSMIJSON(text[i:]); ok {
			return gpus, append(problems, rocmErrors(text)...)
		}
	}
	var gpus []GPUMem
	byIdx := map[int]int{}
	var problems []string
	var csvCols []string
	for _, line := range strings.Split(text, "\n") {
		trim := strings.TrimSpace(line)
		if trim == "" {
			continue
		}
		if m := rocmPlainRe.FindStringSubmatch(trim); m != nil {
			n, _ := strconv.Atoi(m[1])
			i, ok := byIdx[n]
			if !ok {
				gpus = append(gpus, GPUMem{Index: n, Vendor: "amd", Source: "rocm-smi"})
				i = len(gpus) - 1
				byIdx[n] = i
			}
			v := gpuParseSize(m[3], 1)
			if m[2] == rocmTotalKey {
				gpus[i].TotalBytes = v
			} else {
				gpus[i].UsedBytes = v
			}
			continue
		}
		if m := rocmErrRe.FindStringSubmatch(trim); m != nil {
			problems = append(problems, fmt.Sprintf("GPU[%s]: %s", m[1], strings.TrimSpace(m[2])))
			continue
		}
		if strings.HasPrefix(trim, "device,") {
			csvCols = strings.Split(trim, ",")
			continue
		}
		if csvCols != nil {
			parts := strings.Split(trim, ",")
			if len(parts) != len(csvCols) {
				continue
			}
			row := map[string]string{}
			for i, c := range csvCols {
				row[c] = parts[i]
			}
			if g, ok := rocmGPU(row["device"], row); ok {
				gpus = append(gpus, g)
			}
		}
	}
	if len(gpus) == 0 && len(problems) == 0 && strings.TrimSpace(text) != "" {
		problems = append(problems, fmt.Sprintf("no VRAM figures in rocm-smi output; first line: %q", gpuClip(gpuFirstLine([]byte(text)))))
	}
	return gpus, problems
}

func rocmErrors(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if m := rocmErrRe.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			out = append(out, fmt.Sprintf("GPU[%s]: %s", m[1], strings.TrimSpace(m[2])))
		}
	}
	return out
}

// parseROCmSMIJSON reads {"card0": {"VRAM Total Memory (B)": "123", ...}}.
// rocm-smi writes every value as a string; "system" and other non-card keys
// are passed over.
func parseROCmSMIJSON(text string) ([]GPUMem, []string, bool) {
	var m map[string]map[string]any
	if err := json.NewDecoder(strings.NewReader(text)).Decode(&m); err != nil {
		// A non-card key with a non-object value breaks the typed decode;
		// fall back to a loose one.
		var loose map[string]any
		if err2 := json.NewDecoder(strings.NewReader(text)).Decode(&loose); err2 != nil {
			return nil, nil, false
		}
		m = map[string]map[string]any{}
		for k, v := range loose {
			if o, ok := v.(map[string]any); ok {
				m[k] = o
			}
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return rocmCardNum(keys[i]) < rocmCardNum(keys[j]) })
	var gpus []GPUMem
	var problems []string
	for _, k := range keys {
		row := map[string]string{}
		for kk, vv := range m[k] {
			row[kk] = fmt.Sprint(vv)
		}
		if g, ok := rocmGPU(k, row); ok {
			gpus = append(gpus, g)
		} else if rocmCardRe.MatchString(k) {
			problems = append(problems, fmt.Sprintf("%s: no VRAM figures", k))
		}
	}
	return gpus, problems, true
}

func rocmCardNum(k string) int {
	if m := rocmCardRe.FindStringSubmatch(k); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 1 << 30
}

func rocmGPU(card string, row map[string]string) (GPUMem, bool) {
	m := rocmCardRe.FindStringSubmatch(card)
	if m == nil {
		return GPUMem{}, false
	}
	n, _ := strconv.Atoi(m[1])
	g := GPUMem{Index: n, Vendor: "amd", Source: "rocm-smi", Card: card}
	g.Name = row["Card Series"]
	if g.Name == "" {
		g.Name = row["Card series"]
	}
	if b := row["PCI Bus"]; b != "" && !gpuNA(b) {
		g.BusID = gpuNormBusID(b)
	}
	if v, ok := row[rocmTotalKey]; ok {
		g.TotalBytes = gpuParseSize(v, 1)
	} else if v, ok := row[rocmAvailKey]; ok {
		g.TotalBytes = gpuParseSize(v, 1)
	}
	if v, ok := row[rocmUsedKey]; ok {
		g.UsedBytes = gpuParseSize(v, 1)
	} else if v, ok := row[rocmUseKey]; ok {
		g.UsedBytes = gpuParseSize(v, 1)
	}
	if v, ok := row[rocmPctKey]; ok && !gpuNA(v) {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			g.UsedPercent = &f
		}
	}
	return g, g.UsedBytes != nil || g.TotalBytes != nil || g.UsedPercent != nil
}
