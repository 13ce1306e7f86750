package upload

import (
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"strings"
	"unicode/utf16"
)

// Comment size limits. GitHub counts characters; counting UTF-16 units
// errs on the safe side for both that and byte-oriented servers.
const (
	githubCommentLimit = 65536
	jiraCommentLimit   = 32767
	gitlabNoteLimit    = 1_000_000
	giteaCommentLimit  = 65536 // no documented limit; MySQL TEXT columns stop at 64 KiB
)

func units(s string) int { return len(utf16.Encode([]rune(s))) }

// verdictLine is "`gpu_page_fault` (high confidence)".
func verdictLine(v Verdict) string {
	s := "`" + v.Kind + "`"
	if v.Confidence != "" {
		s += " (" + v.Confidence + " confidence)"
	}
	return s
}

// markdownComment is the comment for GitHub, GitLab and Gitea. link is the
// bundle's markdown link, or "" when the bundle is not reachable from the
// ticket. The summary is collapsed: the verdict is what a reader needs first.
func markdownComment(p *Payload, link string, limit int) string {
	var head strings.Builder
	fmt.Fprintf(&head, "**kcrash crash report:** %s\n\n", verdictLine(p.Verdict))
	if p.Verdict.Summary != "" {
		fmt.Fprintf(&head, "> %s\n\n", oneLine(p.Verdict.Summary))
	}
	if link != "" {
		fmt.Fprintf(&head, "**Bundle:** %s · %s · sha256 `%s`\n", link, human.Bytes(p.Size), p.SHA256)
	} else {
		fmt.Fprintf(&head, "**Bundle:** `%s` · %s · sha256 `%s` (not uploaded; kept on host `%s`)\n", p.Name, human.Bytes(p.Size), p.SHA256, p.Host)
	}
	fmt.Fprintf(&head, "**Host:** `%s` · **Exit:** %s\n", p.Host, p.Exit)
	if strings.TrimSpace(p.Summary) == "" {
		return head.String()
	}
	open := "\n<details>\n<summary>Triage summary (summary.md)</summary>\n\n"
	end := "\n\n</details>\n"
	room := limit - units(head.String()) - units(open) - units(end)
	return head.String() + open + fitMarkdown(p.Summary, room) + end
}

// fitMarkdown cuts s to room UTF-16 units at a line boundary, closing a code
// fence the cut left open so it cannot swallow the closing </details>.
func fitMarkdown(s string, room int) string {
	s = strings.TrimRight(s, "\n")
	if units(s) <= room {
		return s
	}
	const note = "\n\n*(truncated: the full summary is in the bundle)*"
	s = cutUnits(s, room-units(note)-8)
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	fences := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fences++
		}
	}
	if fences%2 == 1 {
		s += "\n```"
	}
	return s + note
}

// cutUnits returns the longest prefix of s of at most n UTF-16 units.
func cutUnits(s string, n int) string {
	if n <= 0 {
		return ""
	}
	used := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if used+w > n {
			return s[:i]
		}
		used += w
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// jiraWikiComment is the v2 comment: wiki markup, which Server/Data Center
// render and Cloud converts. [^name] links the attachment on the issue.
func jiraWikiComment(p *Payload, attachment string) string {
	var head strings.Builder
	fmt.Fprintf(&head, "*kcrash crash report:* {{%s}}", wikiEscape(p.Verdict.Kind))
	if p.Verdict.Confidence != "" {
		fmt.Fprintf(&head, " (%s confidence)", wikiEscape(p.Verdict.Confidence))
	}
	head.WriteString("\n")
	if p.Verdict.Summary != "" {
		fmt.Fprintf(&head, "bq. %s\n", wikiEscape(oneLine(p.Verdict.Summary)))
	}
	fmt.Fprintf(&head, "Bundle: [^%s] (%s, sha256 {{%s}})\n", attachment, human.Bytes(p.Size), p.SHA256)
	fmt.Fprintf(&head, "Host: {{%s}}, %s\n", wikiEscape(p.Host), wikiEscape(p.Exit))
	if strings.TrimSpace(p.Summary) == "" {
		return head.String()
	}
	const open, end = "{noformat}\n", "\n{noformat}\n"
	// A {noformat} inside the summary would end the block early.
	sum := strings.ReplaceAll(strings.TrimRight(p.Summary, "\n"), "{noformat}", "{ noformat}")
	room := jiraCommentLimit - units(head.String()) - units(open) - units(end)
	if units(sum) > room {
		const note = "\n(truncated: the full summary is in the bundle)"
		sum = cutUnits(sum, room-units(note)) + note
	}
	return head.String() + open + sum + end
}

func wikiEscape(s string) string {
	r := strings.NewReplacer("{", `\{`, "}", `\}`, "[", `\[`, "]", `\]`, "|", `\|`)
	return r.Replace(s)
}

// adfComment is the v3 comment: an Atlassian Document Format document.
// ADF rejects empty text nodes, so every node is built only from non-empty text.
func adfComment(p *Payload, attachmentName, attachmentURL string) map[string]any {
	text := func(s string, marks ...map[string]any) map[string]any {
		n := map[string]any{"type": "text", "text": s}
		if len(marks) > 0 {
			n["marks"] = marks
		}
		return n
	}
	para := func(nodes ...map[string]any) map[string]any {
		var keep []map[string]any
		for _, n := range nodes {
			if s, _ := n["text"].(string); s != "" {
				keep = append(keep, n)
			}
		}
		return map[string]any{"type": "paragraph", "content": keep}
	}
	strong := map[string]any{"type": "strong"}
	code := map[string]any{"type": "code"}
	conf := ""
	if p.Verdict.Confidence != "" {
		conf = " (" + p.Verdict.Confidence + " confidence)"
	}
	content := []map[string]any{
		para(text("kcrash crash report: ", strong), text(p.Verdict.Kind, code), text(conf)),
	}
	if p.Verdict.Summary != "" {
		content = append(content, para(text(oneLine(p.Verdict.Summary))))
	}
	name := text(attachmentName)
	if attachmentURL != "" {
		name = text(attachmentName, map[string]any{"type": "link", "attrs": map[string]any{"href": attachmentURL}})
	}
	content = append(content,
		para(text("Bundle: "), name, text(fmt.Sprintf(" (%s, sha256 ", human.Bytes(p.Size))), text(p.SHA256, code), text(")")),
		para(text("Host: "), text(p.Host, code), text(", "+p.Exit)))
	if sum := strings.TrimRight(p.Summary, "\n"); strings.TrimSpace(sum) != "" {
		// Jira Cloud stores ADF as JSON; keep the block well inside its 32 KB body limit.
		if units(sum) > jiraCommentLimit-2000 {
			sum = cutUnits(sum, jiraCommentLimit-2100) + "\n(truncated: the full summary is in the bundle)"
		}
		content = append(content, map[string]any{"type": "codeBlock", "content": []map[string]any{text(sum)}})
	}
	return map[string]any{"type": "doc", "version": 1, "content": content}
}
