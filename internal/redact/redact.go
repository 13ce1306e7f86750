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

// tokenShapes are secrets recognisable by their form wherever they appear.
var tokenShapes = regexp.MustCompile(strings.Join([]string{
	`hf_[A-Za-z0-9]{30,}`,                                              // Hugging Face
	`gh[pousr]_[A-Za-z0-9]{36,}`,                                       // GitHub classic and fine-grained app tokens
	`github_pat_[A-Za-z0-9_]{50,}`,                                     // GitHub fine-grained PAT
	`glpat-[A-Za-z0-9_\-]{20,}`,                                        // GitLab PAT
	`(?:AKIA|ASIA)[A-Z0-9]{16}`,                                        // AWS access key id
	`xox[baprs]-[A-Za-z0-9\-]{10,}`,                                    // Slack
	`sk-[A-Za-z0-9_\-]{20,}`,                                           // OpenAI-style API keys
	`eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}`, // JWT
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`,
	`(?i)(?:authorization:\s*(?:bearer|basic|token)\s+)[A-Za-z0-9+/=._\-]{8,}`,
}, "|"))

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
	return tokenShapes.ReplaceAllFunc(b, func(m []byte) []byte {
		// keep an Authorization header's scheme so the line still reads
		if i := bytes.IndexAny(m, " \t"); i > 0 && bytes.HasPrefix(bytes.ToLower(m), []byte("authorization")) {
			if j := bytes.LastIndexAny(m, " \t"); j > i {
				return append(append([]byte{}, m[:j+1]...), Mask...)
			}
		}
		return []byte(Mask)
	})
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

// Find returns the 1-based line numbers in b holding a secret: what upload's
// last check uses to refuse a bundle, naming the place.
func (r *Redactor) Find(b []byte) []int {
	var lines []int
	n := 1
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line = b[:i]
			b = b[i+1:]
		} else {
			b = nil
		}
		if r.hit(line) {
			lines = append(lines, n)
		}
		n++
	}
	return lines
}

func (r *Redactor) hit(line []byte) bool {
	for _, v := range r.values {
		if bytes.Contains(line, v) {
			return true
		}
	}
	return tokenShapes.Match(line)
}
