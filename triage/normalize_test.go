package triage

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestVerdictSurvivesGarbling: the same real log, passed through what happens
// to logs on their way to a reader (a container runtime's prefix, torchrun's
// and vLLM's per-process prefixes, a markdown quote, a terminal that
// hard-wraps at 80 columns), must get the same verdict. Samples whose evidence
// is kernel messages are left out: those prefixes are kernlog's business.
func TestVerdictSurvivesGarbling(t *testing.T) {
	garble := map[string]func(string) string{
		"cri":       func(l string) string { return "2025-01-17T18:48:10.418481013+01:00 stderr F " + l },
		"rank":      func(l string) string { return "[rank3]: " + l },
		"worker":    func(l string) string { return "(Worker_TP1 pid=4242) " + l },
		"markdown":  func(l string) string { return "> " + l },
		"wrap-80":   wrapAt(80),
		"wrap-120":  wrapAt(120),
		"cri+rank":  func(l string) string { return "2025-01-17T18:48:10Z stdout F [rank0]: " + l },
		"quote+pid": func(l string) string { return "> (EngineCore_DP0 pid=77) " + l },
		"bold":      func(l string) string { return markdownWrap(l, "**") },
		"backticks": func(l string) string { return markdownWrap(l, "`") },
		"glued":     glueAfterColon,
	}
	for _, s := range loadUnseen(t, "dev") {
		// The start-wait line's wrapped half loses vLLM's `(APIServer pid=N)`
		// prefix, so the wrap join (within one stream) cannot rejoin it; a
		// journal's systemd line loses its `host systemd[1]:` the same way.
		if strings.HasPrefix(s.name, "amdgpu-") || strings.HasPrefix(s.name, "nvidia-") || strings.Contains(s.name, "waiting-for-1-local-core-engine") || strings.Contains(s.name, "main-process-exited") {
			continue
		}
		for name, g := range garble {
			// A traceback cut after its frames is read from its frames alone
			// (a complete one also from its exception line): a hard wrap cuts
			// the long frame lines in two, and no rule rejoins frames (inline
			// code around an indented frame is dropped before matching).
			// gdb's stacks of a live process are read the same way, from where
			// the log ends, and a hard wrap cuts their long frame lines too.
			if (strings.HasSuffix(s.name, "-frames-cut.txt") || strings.Contains(s.name, "-gdb-")) && strings.HasPrefix(name, "wrap-") {
				continue
			}
			var b strings.Builder
			for _, l := range strings.SplitAfter(s.text, "\n") {
				nl := strings.HasSuffix(l, "\n")
				l = strings.TrimSuffix(l, "\n")
				b.WriteString(g(l))
				if nl {
					b.WriteString("\n")
				}
			}
			got := unseenVerdict(t, unseenSample{name: s.name, expect: s.expect, text: b.String()})
			if string(got) != s.expect {
				t.Errorf("%s garbled by %s: verdict %s, want %s", s.name, name, got, s.expect)
			}
		}
	}
}

// TestVerdictSurvivesWholeLogGarbling: what happens to a whole log rather
// than to each line: pasted into one line (newlines lost), shipped as one
// JSON-escaped string, or split by a container runtime into partial (P)
// records that the final (F) one completes.
func TestVerdictSurvivesWholeLogGarbling(t *testing.T) {
	garble := map[string]func(string) string{
		"one-line": func(s string) string { return strings.Join(strings.Fields(s), " ") + "\n" },
		"json": func(s string) string {
			b, _ := json.Marshal(map[string]string{"log": s, "stream": "stderr"})
			return string(b) + "\n"
		},
		"cri-partial": func(s string) string {
			var b strings.Builder
			for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				if len(l) > 40 {
					b.WriteString("2025-01-17T18:48:10.418481013Z stderr P " + l[:len(l)/2] + "\n")
					l = l[len(l)/2:]
				}
				b.WriteString("2025-01-17T18:48:10.418481013Z stderr F " + l + "\n")
			}
			return b.String()
		},
	}
	for _, s := range loadUnseen(t, "dev") {
		// vLLM's start-wait and output-wait stalls are read from the line
		// repeating: a log folded into one line has one such line.
		// A traceback cut after its frames is read from where the log ends:
		// folded into one line, it has no frames left to end on; so are gdb's
		// stacks of a live process (`-gdb-` in the name).
		if strings.HasPrefix(s.name, "amdgpu-") || strings.HasPrefix(s.name, "nvidia-") || strings.Contains(s.name, "waiting-for-1-local-core-engine") || strings.Contains(s.name, "mqllmengine-") || strings.HasSuffix(s.name, "-frames-cut.txt") || strings.Contains(s.name, "-gdb-") {
			continue
		}
		for name, g := range garble {
			got := unseenVerdict(t, unseenSample{name: s.name, expect: s.expect, text: g(s.text)})
			if string(got) != s.expect {
				t.Errorf("%s garbled by %s: verdict %s, want %s", s.name, name, got, s.expect)
			}
		}
	}
}

// markdownWrap puts a markdown mark around a line's text, after its indent.
func markdownWrap(l, mark string) string {
	body := strings.TrimLeft(l, " \t")
	if strings.TrimSpace(body) == "" {
		return l
	}
	return l[:len(l)-len(body)] + mark + strings.TrimRight(body, " \t") + mark
}

// glueAfterColon drops the space after "Error:"-like words, as some log
// shippers and chat tools do ("error:uncorrectable").
func glueAfterColon(l string) string {
	for _, w := range []string{"error: ", "Error: ", "ERROR: ", "failure: ", "Exception: "} {
		l = strings.ReplaceAll(l, w, strings.TrimSuffix(w, " "))
	}
	return l
}

// wrapAt cuts a line every n runes, as a terminal without line wrapping
// support in the pasting tool does.
func wrapAt(n int) func(string) string {
	return func(l string) string {
		var parts []string
		for utf8.RuneCountInString(l) > n {
			i, k := 0, 0
			for k < n {
				_, w := utf8.DecodeRuneInString(l[i:])
				i += w
				k++
			}
			parts = append(parts, l[:i])
			l = l[i:]
		}
		return strings.Join(append(parts, l), "\n")
	}
}

// TestBuiltinSignaturesHavePrefilter: a signature without required literals
// runs its regexp on every line of every log (a case-insensitive pattern made
// the scan three times slower); each built-in must have one.
func TestBuiltinSignaturesHavePrefilter(t *testing.T) {
	for _, s := range BuiltinSignatures() {
		if len(s.literals) == 0 {
			t.Errorf("signature %s has no literal prefilter; spell its pattern without (?i) or with a fixed word", s.Name)
		}
	}
}

// TestScanLogKubernetesOOMKilled: Kubernetes' own words for a container the
// kernel killed at its memory limit (kubectl describe / get pods) are host_oom;
// the exit code 137 next to them is the kill that explains, not a cause of its
// own; docker's "OOMKilled": false is not an OOM.
func TestScanLogKubernetesOOMKilled(t *testing.T) {
	for _, rel := range []string{"4-oom-killer/k8s-oomkilled-describe-pod-last-state.txt", "4-oom-killer/k8s-oomkilled-get-pods-status-column.txt"} {
		fs, err := ScanLog(strings.NewReader(lsCorpus(t, rel)), rel)
		if err != nil || len(fs) == 0 || fs[0].Kind != "host_oom" {
			t.Errorf("%s: %v %+v", rel, err, fs)
		}
		r := Decide(Input{Findings: fs})
		if r.Verdict.Kind != "host_oom" {
			t.Errorf("%s: verdict %s", rel, r.Verdict.Kind)
		}
		for _, f := range r.Findings {
			if f.Kind == "killed" && f.Details["verdict_role"] != RoleExplained {
				t.Errorf("%s: the exit code's kill is %v, want explained", rel, f.Details["verdict_role"])
			}
		}
	}
	fs, _ := ScanLog(strings.NewReader("            \"OOMKilled\": false,\n"), "inspect")
	if len(fs) != 0 {
		t.Errorf("docker inspect's OOMKilled=false read as an OOM kill: %+v", fs)
	}
}
