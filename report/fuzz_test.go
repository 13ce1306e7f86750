package report

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzPage feeds the page untrusted timelines, triage and logs: it must not
// panic, and no bundle byte may become markup.
//
//	go test ./report -run '^$' -fuzz FuzzPage -fuzztime 30s
func FuzzPage(f *testing.F) {
	base := loadFixture(f, "crash-gpu")
	f.Add(base.files["gpu.json"], base.files["memory.json"], base.files["processes.json"], []byte(base.Manifest.Triage), base.files["output.log"])
	f.Add([]byte(`{"samples":[{"time":"0001-01-01T00:00:00Z","gpus":[{"index":-1,"vram_used_bytes":18446744073709551615,"vram_total_bytes":0}]}]}`),
		[]byte(`{"samples":[{"time":"2262-01-01T00:00:00Z","meminfo":{"MemTotal":1,"MemAvailable":2}}],"cgroup":{"effective_limit_bytes":0}}`),
		[]byte(`{"root_pid":1,"processes":[{"pid":1,"start_time":"1970-01-01T00:00:00Z","exited":true,"exit_signal":"<script>"}]}`),
		[]byte(`{"verdict":{"kind":"<b>x"},"findings":[{"kind":"x","text":"</svg><script>","time":"1999-01-01T00:00:00Z","pid":1}],"next_steps":["`+"`"+`<i>"]}`),
		[]byte("\x1b[2J\r\x00<script>\n"))
	f.Fuzz(func(t *testing.T, gpu, mem, procs, tri, out []byte) {
		in := loadFixture(t, "crash-gpu")
		in.files["gpu.json"], in.files["memory.json"], in.files["processes.json"], in.files["output.log"] = gpu, mem, procs, out
		in.Manifest.Triage = tri
		var buf bytes.Buffer
		if err := Write(&buf, in); err != nil {
			t.Fatal(err)
		}
		page := buf.String()
		if strings.Contains(page, "<script") || strings.Contains(page, "<i>") || strings.Contains(page, "<b>") {
			t.Fatalf("bundle text became markup")
		}
	})
}
