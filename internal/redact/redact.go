// Package redact removes secrets from everything kcrash writes or sends: the
// values of variables whose names look secret, and well-known token shapes.
package redact

import (
	"bytes"
	"regexp"
	"sort"
	"strings"
)

// Mask replaces every secret.
const Mask = "[REDACTED]"

var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|KEY|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION|SIGNATURE)`)

// Names that match secretName but are known to carry no secret; redacting
// their values would only blank out useful evidence.
var notSecret = map[string]bool{
	"SSH_AUTH_SOCK": true, "XAUTHORITY": true, "KEYTIMEOUT": true, "GPG_AGENT_INFO": false,
}

// shape is a secret recognisable by its form. Scanning looks for the literal
// prefix with bytes.Index and runs the expression only there: a regexp over a
// whole 16 MiB output log would cost seconds between crash and bundle.
type shape struct {
	prefix string
	re     *regexp.Regexp // anchored at the prefix
	word   bool           // the prefix must not continue a word ("task-" is not "sk-")
}

func mustShape(prefix, expr string, word bool) shape {
	return shape{prefix: prefix, re: regexp.MustCompile(`\A(?:` + expr + `)`), word: word}
}

var shapes = []shape{
	mustShape("hf_", `hf_[A-Za-z0-9]{30,}`, true),                                              // Hugging Face
	mustShape("gh", `gh[pousr]_[A-Za-z0-9]{36,}`, true),                                        // GitHub tokens
	mustShape("github_pat_", `github_pat_[A-Za-z0-9_]{50,}`, true),                             // GitHub fine-grained PAT
	mustShape("glpat-", `glpat-[A-Za-z0-9_\-]{20,}`, true),                                     // GitLab PAT
	mustShape("AKIA", `AKIA[A-Z0-9]{16}`, true),                                                // AWS access key id
	mustShape("ASIA", `ASIA[A-Z0-9]{16}`, true),                                                // AWS temporary key id
	mustShape("xox", `xox[baprs]-[A-Za-z0-9\-]{10,}`, true),                                    // Slack
	mustShape("sk-", `sk-[A-Za-z0-9_\-]{20,}`, true),                                           // OpenAI-style API keys
	mustShape("eyJ", `eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`, true), // JWT
	mustShape("-----BEGIN ", `-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`, false),
	mustShape("uthorization:", `uthorization:\s*(?i:bearer|basic|token)\s+[A-Za-z0-9+/=._\-]{8,}`, false),
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// span is a secret's position in a buffer.
type span struct{ start, end, keep int } // keep: bytes at start left visible (a header's scheme)

// findShapes returns the token-shaped secrets in b, in order, not overlapping.
func findShapes(b []byte) []span {
	var spans []span
	for _, sh := range shapes {
		for off := 0; off < len(b); {
			i := bytes.Index(b[off:], []byte(sh.prefix))
			if i < 0 {
				break
			}
			at := off + i
			off = at + 1
			if sh.word && at > 0 && isWordByte(b[at-1]) {
				continue
			}
			m := sh.re.FindIndex(b[at:])
			if m == nil {
				continue
			}
			sp := span{start: at, end: at + m[1]}
			if sh.prefix == "uthorization:" {
				// keep "Authorization: Bearer " so the line still reads
				if j := bytes.LastIndexAny(b[at:sp.end], " \t"); j > 0 {
					sp.keep = j + 1
				}
			}
			spans = append(spans, sp)
			off = sp.end
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	out := spans[:0]
	for _, sp := range spans {
		if len(out) > 0 && sp.start < out[len(out)-1].end {
			if sp.end > out[len(out)-1].end {
				out[len(out)-1].end = sp.end
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}

// IsSecretName reports whether an environment variable's name says it holds a secret.
func IsSecretName(name string) bool {
	return !notSecret[name] && secretName.MatchString(name)
}

// Redactor masks a fixed set of secret values plus token shapes.
type Redactor struct {
	values [][]byte // longest first, so a secret containing another is masked whole
}

// New builds a Redactor from an environment (KEY=VALUE strings): every value of
// a secret-looking name becomes a literal to mask. Values shorter than 6
// bytes are skipped: masking "1" or "true" everywhere would wreck the evidence.
func New(environ []string) *Redactor {
	seen := map[string]bool{}
	r := &Redactor{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !IsSecretName(k) || len(v) < 6 || seen[v] {
			continue
		}
		seen[v] = true
		r.values = append(r.values, []byte(v))
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// Bytes returns b with every secret masked. b is not modified.
func (r *Redactor) Bytes(b []byte) []byte {
	for _, v := range r.values {
		if bytes.Contains(b, v) {
			b = bytes.ReplaceAll(b, v, []byte(Mask))
		}
	}
	spans := findShapes(b)
	if len(spans) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	last := 0
	for _, sp := range spans {
		out = append(out, b[last:sp.start+sp.keep]...)
		out = append(out, Mask...)
		last = sp.end
	}
	return append(out, b[last:]...)
}

// String is Bytes for strings.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

// Env returns name→value with secret values masked, for the manifest.
func (r *Redactor) Env(vars map[string]string) map[string]string {
	out := make(map[string]string, len(vars))
	for k, v := range vars {
		if IsSecretName(k) {
			out[k] = Mask
		} else {
			out[k] = r.String(v)
		}
	}
	return out
}

// Find returns the 1-based line numbers in b holding a secret, in order:
// what upload's last check uses to refuse a bundle, naming the place.
func (r *Redactor) Find(b []byte) []int {
	var offs []int
	for _, v := range r.values {
		for off := 0; ; {
			i := bytes.Index(b[off:], v)
			if i < 0 {
				break
			}
			offs = append(offs, off+i)
			off += i + len(v)
		}
	}
	for _, sp := range findShapes(b) {
		offs = append(offs, sp.start)
	}
	sort.Ints(offs)
	var lines []int
	line, pos := 1, 0
	for _, o := range offs {
		line += bytes.Count(b[pos:o], []byte("\n"))
		pos = o
		if len(lines) == 0 || lines[len(lines)-1] != line {
			lines = append(lines, line)
		}
	}
	return lines
}
