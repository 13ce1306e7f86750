package collectors

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// What the gpu collector asks nvidia-smi for. gpu_bus_id ties each process
// row to a GPU; pid alone would not say which card held the memory.
var (
	nvidiaGPUFields = []string{"index", "pci.bus_id", "name", "memory.used", "memory.total"}
	nvidiaAppFields = []string{"pid", "gpu_bus_id", "used_memory"}
)

// parseNvidiaSMI reads nvidia-smi output in whichever of its three layouts
// it came: --query-gpu CSV (what the collector asks for), the default
// table, or -q. fields are the columns asked for, used when the CSV has no
// header (noheader). problems are lines worth reporting; they never abort
// the parse.
func parseNvidiaSMI(out []byte, fields []string) ([]GPUMem, []string) {
	text := strings.ReplaceAll(string(out), "\r\n", "\n")
	switch {
	case strings.Contains(text, "FB Memory Usage") || strings.Contains(text, "NVSMI LOG") || nvidiaQGPURe.MatchString(text):
		return parseNvidiaQ(text)
	case strings.Contains(text, "NVIDIA-SMI ") || strings.Contains(text, "MIG devices:") || nvidiaTableGPURe.MatchString(text):
		return parseNvidiaTable(text)
	}
	return parseNvidiaCSV(text, fields)
}

// nvidiaCol strips the unit suffix a header carries without nounits
// ("memory.used [MiB]").
func nvidiaCol(h string) string {
	h = strings.TrimSpace(h)
	if i := strings.Index(h, " ["); i >= 0 {
		h = h[:i]
	}
	return h
}

var nvidiaHeaderRe = regexp.MustCompile(`^[a-z_.]+$`)

// nvidiaHeader reports whether a CSV line is a header (format=csv without
// noheader), whose column order then overrides the one asked for.
func nvidiaHeader(parts []string) ([]string, bool) {
	cols := make([]string, len(parts))
	known := false
	for i, p := range parts {
		c := nvidiaCol(p)
		if !nvidiaHeaderRe.MatchString(c) {
			return nil, false
		}
		switch c {
		case "index", "pid", "name", "pci.bus_id", "memory.used", "memory.total", "used_memory", "used_gpu_memory", "gpu_bus_id", "uuid", "gpu_uuid":
			known = true
		}
		cols[i] = c
	}
	return cols, known
}

func nvidiaSplit(line string) []string {
	parts := strings.Split(line, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// parseNvidiaCSV reads --query-gpu output. Rows that do not fit the
// columns (a shell prompt, another command's table printed after it) are
// passed over: the corpus has both.
func parseNvidiaCSV(text string, fields []string) ([]GPUMem, []string) {
	cols := fields
	var gpus []GPUMem
	var stray []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := nvidiaSplit(line)
		if h, ok := nvidiaHeader(parts); ok {
			cols = h
			continue
		}
		g, ok := nvidiaCSVRow(parts, cols, len(gpus))
		if !ok {
			stray = append(stray, line)
			continue
		}
		gpus = append(gpus, g)
	}
	var problems []string
	if len(gpus) == 0 && len(stray) > 0 {
		problems = append(problems, fmt.Sprintf("no GPU rows in nvidia-smi output; first line: %q", gpuClip(stray[0])))
	}
	return gpus, problems
}

func nvidiaCSVRow(parts, cols []string, ordinal int) (GPUMem, bool) {
	g := GPUMem{Index: ordinal, Vendor: "nvidia", Source: "nvidia-smi"}
	if len(parts) != len(cols) {
		return g, false
	}
	hasMem := false
	for i, c := range cols {
		v := parts[i]
		switch c {
		case "index":
			n, err := strconv.Atoi(v)
			if err != nil {
				return g, false
			}
			g.Index = n
		case "pci.bus_id":
			if !gpuNA(v) {
				g.BusID = gpuNormBusID(v)
			}
		case "name":
			g.Name = v
		case "memory.used", "memory.total":
			hasMem = true
			var p *uint64
			if !gpuNA(v) {
				if p = gpuParseSize(v, 1<<20); p == nil {
					return g, false
				}
			}
			if c == "memory.used" {
				g.UsedBytes = p
			} else {
				g.TotalBytes = p
			}
		}
	}
	return g, hasMem
}

// parseNvidiaComputeApps reads --query-compute-apps output. Older drivers
// print "No running processes found" instead of an empty CSV.
func parseNvidiaComputeApps(out []byte, fields []string) ([]gpuProcEntry, []string) {
	cols := fields
	var procs []gpuProcEntry
	var stray []string
	for _, line := range strings.Split(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(strings.ToLower(line), "no running") {
			continue
		}
		parts := nvidiaSplit(line)
		if h, ok := nvidiaHeader(parts); ok {
			cols = h
			continue
		}
		if len(parts) != len(cols) {
			stray = append(stray, line)
			continue
		}
		p := gpuProcEntry{Where: "nvidia-smi"}
		ok := true
		for i, c := range cols {
			v := parts[i]
			switch c {
			case "pid":
				n, err := strconv.Atoi(v)
				ok = ok && err == nil && n > 0
				p.Pid = n
			case "gpu_bus_id":
				if !gpuNA(v) {
					p.GPU = gpuNormBusID(v)
				}
			case "gpu_uuid":
				if p.GPU == "" && !gpuNA(v) {
					p.GPU = v
				}
			case "process_name":
				p.Name = v
			case "used_memory", "used_gpu_memory":
				// [N/A] under MIG or without permission: kept as unknown.
				p.Used = gpuParseSize(v, 1<<20)
			}
		}
		if !ok {
			stray = append(stray, line)
			continue
		}
		procs = append(procs, p)
	}
	var problems []string
	if len(procs) == 0 && len(stray) > 0 {
		problems = append(problems, fmt.Sprintf("no process rows in nvidia-smi output; first line: %q", gpuClip(stray[0])))
	}
	return procs, problems
}

var (
	// "|   0  NVIDIA GeForce RTX 3090        On  |   00000000:05:00.0 Off |"
	nvidiaTableGPURe = regexp.MustCompile(`(?m)^\|\s+(\d+)\s+(.*?)\s+(On|Off|N/A)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s`)
	nvidiaTableMemRe = regexp.MustCompile(`(\d+)MiB\s*/\s*(\d+)MiB`)
	// "|  1    3   0   0  |  14366MiB / 19968MiB | ..." (GPU GI CI MIG-dev)
	nvidiaMIGRe = regexp.MustCompile(`^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s*(\d+)MiB\s*/\s*(\d+)MiB`)
)

// parseNvidiaTable reads the default nvidia-smi table. The memory cell is
// on the second line of each GPU's block; "Not Supported" there (GB10)
// means unknown. In the MIG table the second line of each instance is BAR1
// and is not read.
func parseNvidiaTable(text string) ([]GPUMem, []string) {
	var gpus []GPUMem
	pending := -1 // index in gpus of the GPU whose memory line comes next
	for _, line := range strings.Split(text, "\n") {
		if m := nvidiaTableGPURe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			gpus = append(gpus, GPUMem{Index: n, Name: strings.TrimSpace(m[2]), BusID: gpuNormBusID(m[4]), Vendor: "nvidia", Source: "nvidia-smi"})
			pending = len(gpus) - 1
			continue
		}
		if m := nvidiaMIGRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			g := GPUMem{Index: n, Vendor: "nvidia", Source: "nvidia-smi", MIG: fmt.Sprintf("GI %s CI %s dev %s", m[2], m[3], m[4])}
			g.UsedBytes, g.TotalBytes = gpuParseSize(m[5], 1<<20), gpuParseSize(m[6], 1<<20)
			gpus = append(gpus, g)
			pending = -1
			continue
		}
		if pending < 0 || !strings.HasPrefix(line, "|") {
			if strings.HasPrefix(line, "+") {
				pending = -1
			}
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		if m := nvidiaTableMemRe.FindStringSubmatch(cells[2]); m != nil {
			gpus[pending].UsedBytes, gpus[pending].TotalBytes = gpuParseSize(m[1], 1<<20), gpuParseSize(m[2], 1<<20)
		}
		pending = -1
	}
	var problems []string
	if len(gpus) == 0 {
		problems = append(problems, "no GPU rows in nvidia-smi table")
	}
	return gpus, problems
}

var (
	nvidiaQGPURe  = regexp.MustCompile(`(?m)^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$`)
	nvidiaQPairRe = regexp.MustCompile(`^(\s*)([^:]+?)\s*:\s*(.*?)\s*$`)
)

// parseNvidiaQ reads nvidia-smi -q: one "GPU <bus id>" block per GPU, FB
// memory under "FB Memory Usage". BAR1 has the same Total/Used keys and
// must not be taken for VRAM; unified-memory parts have N/A or no FB block.
func parseNvidiaQ(text string) ([]GPUMem, []string) {
	var gpus []GPUMem
	section := ""
	for _, line := range strings.Split(text, "\n") {
		if m := nvidiaQGPURe.FindStringSubmatch(line); m != nil {
			gpus = append(gpus, GPUMem{Index: len(gpus), BusID: gpuNormBusID(m[1]), Vendor: "nvidia", Source: "nvidia-smi"})
			section = ""
			continue
		}
		if len(gpus) == 0 {
			continue
		}
		g := &gpus[len(gpus)-1]
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		trim := strings.TrimSpace(line)
		if trim == "" {
			continue
		}
		if indent <= 4 && !strings.Contains(trim, ":") {
			section = trim
			continue
		}
		m := nvidiaQPairRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, val := m[2], m[3]
		if indent <= 4 {
			section = ""
			if key == "Product Name" {
				g.Name = val
			}
			continue
		}
		if section != "FB Memory Usage" {
			continue
		}
		switch key {
		case "Total":
			g.TotalBytes = gpuParseSize(val, 1<<20)
		case "Used":
			g.UsedBytes = gpuParseSize(val, 1<<20)
		}
	}
	var problems []string
	if len(gpus) == 0 {
		problems = append(problems, "no GPU blocks in nvidia-smi -q output")
	}
	return gpus, problems
}

func gpuClip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
