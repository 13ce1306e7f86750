package triage

import (
	"strings"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Vendor names the GPU vendor ("amd", "nvidia") that the findings' own
// wording shows (HIP vs CUDA messages, amdgpu vs NVRM, Xids), then the GPUs a
// bundle's manifest lists; "" when neither says, or both. kcrash repro picks
// the sync profile with it, so it never guesses from the host it runs on.
func Vendor(findings []evidence.Finding, gpus []string) string {
	x := &facts{}
	for _, f := range findings {
		x.all = append(x.all, &cf{f: f})
	}
	if v := x.guessVendor(); v != "" {
		return v
	}
	amd, nv := false, false
	for _, g := range gpus {
		l := strings.ToLower(g)
		amd = amd || strings.Contains(l, "amd") || strings.Contains(l, "instinct") || strings.Contains(l, "radeon")
		nv = nv || strings.Contains(l, "nvidia") || strings.Contains(l, "tesla") || strings.Contains(l, "geforce")
	}
	switch {
	case amd && !nv:
		return "amd"
	case nv && !amd:
		return "nvidia"
	}
	return ""
}

// SuspectAPI names the kernel-API call a result's verdict rests on: the
// finding marked suspect, else the call that never returned, else the last
// call; "" when the run logged none or exited cleanly.
func SuspectAPI(res Result) string {
	if res.Verdict.Kind == evidence.CleanExit {
		return ""
	}
	for _, f := range res.Findings {
		if f.Details.Text(detail.VerdictRole) == RoleSuspect {
			if api := f.Details.Text(detail.API); api != "" {
				return api
			}
		}
	}
	if ka := res.KernelAPI; ka != nil {
		if ka.UnfinishedCall != nil {
			return ka.UnfinishedCall.API
		}
		if ka.LastCall != nil {
			return ka.LastCall.API
		}
	}
	return ""
}
