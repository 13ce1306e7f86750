package triage

import (
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"strings"
)

// rulesMarkdown renders the verdict table for the README (triage/RULES.md
// holds a copy, kept equal by a test), so that the documentation cannot
// drift from the code.
func rulesMarkdown() string {
	var b strings.Builder
	b.WriteString("### Verdict rules\n\n")
	b.WriteString("`kcrash` settles on one root cause by the first rule, in this order, that has evidence. " +
		"Findings attributed to another process or device (`attribution: unrelated`) are ignored; " +
		"findings that only report another failure (SGLang's sigquit, vLLM's dead engine, Xid 43/45) never " +
		"stand as a cause. Every finding of the result carries `details.verdict_role`: `root_cause`, " +
		"`explained` (a symptom the verdict accounts for), `suspect` (the kernel-API call the fault is " +
		"pinned on), `also_found` or `ignored`.\n\n")
	b.WriteString("| # | verdict | confidence | when | why here | explains |\n|---|---|---|---|---|---|\n")
	for i, r := range rules {
		conf := r.confidence
		if r.adjust != nil {
			conf += " (adjusted)"
		}
		var ex []string
		for _, k := range r.explains {
			ex = append(ex, "`"+string(k)+"`")
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s | %s | %s |\n", i+1, r.kind, conf,
			strings.ReplaceAll(r.when, "|", "\\|"), strings.ReplaceAll(r.why, "|", "\\|"), human.OrDash(strings.Join(ex, " ")))
	}
	b.WriteString("\nConfidence adjustments: `clean_exit` is medium when GPU or OOM errors were logged along the way, low when NaN/Inf values (a NaN loss) were; " +
		"`gpu_arch_mismatch` is medium when its only evidence is rocBLAS's `Cannot read .../TensileLibrary.dat` (no ISA named: a wrong library path is the other reading); " +
		"`gpu_illegal_memory_access` is medium when its only evidence is a BLAS execution failure; " +
		"`gpu_hang` is medium without a kernel-log line; `native_crash` is medium when the exit status does not show the crash signal; " +
		"`python_exception` is high only when the program exited with a non-zero code and no signal. " +
		"An exit code above 128 with no signal is read as death by signal N-128.\n\n" +
		"For GPU verdicts the summary names the kernel-API call that started and never returned (level ≥3), " +
		"or else the last call logged. Next steps come from the debug-kernel-crash workflow and carry the " +
		"`kcrash run` command line that does them.\n")
	return b.String()
}
