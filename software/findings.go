package software

import (
	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/evidence/detail"
)

// Findings turns a report's issues into triage's evidence: source software,
// kind unknown and role info (a build problem is a lead, not a failure by
// itself), with the issue kind, the package and the library as details.
func Findings(rep *Report) []evidence.Finding {
	var out []evidence.Finding
	for _, is := range rep.Issues {
		f := evidence.Finding{Kind: evidence.Unknown, Source: evidence.SourceSoftware, File: "software.json", Text: is.Text,
			Pid: is.Pid, Attribution: "pid-in-tree", Details: evidence.Details{}}
		f.Details.SetText(detail.Role, "info")
		f.Details.SetText(detail.SoftwareIssue, is.Kind)
		if is.Package != "" {
			f.Details.SetText(detail.Package, is.Package)
		}
		if len(is.Libraries) > 0 {
			f.Details.SetText(detail.Library, is.Libraries[0])
		}
		out = append(out, f)
	}
	return out
}
