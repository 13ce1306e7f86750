// Package redact removes secrets from everything kcrash writes or sends: the
// values of variables whose names look secret, and well-known token shapes.
package redact

import (
	"bytes"
	"encoding/json"
	"io"
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

// MaxSecret is the longest secret the streaming redaction of a file is sure
// to see whole across its chunk cuts (a PEM key block is handled apart).
const MaxSecret = 64 << 10

// shape is a secret recognisable by its form. Scanning looks for the literal
// prefix with bytes.Index and runs the expression only there: a regexp over a
// whole 16 MiB output log would cost seconds between crash and bundle.
type shape struct {
	prefix string
	re     *regexp.Regexp // anchored at the prefix
	word   bool           // the prefix must not continue a word ("task-" is not "sk-")
	fold   bool           // the prefix matches in any case (searched in an ASCII-lowered copy)
	// keep returns how many bytes of the match stay visible (a header's
	// scheme, a URL's user); nil keeps none.
	keep func(m []byte) int
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
	{ // HTTP authorization headers, any case: keep "Authorization: Bearer " so the line still reads
		prefix: "authorization", fold: true,
		re:   regexp.MustCompile(`\A(?i:authorization)["']?\s*[:=]\s*["']?(?i:bearer|basic|token|digest|negotiate|apikey)\s+[A-Za-z0-9+/=._~\-]{6,}`),
		keep: func(m []byte) int { return bytes.LastIndexAny(m, " \t") + 1 },
	},
	{ // GitLab's header: PRIVATE-TOKEN: value
		prefix: "private-token", fold: true,
		re:   regexp.MustCompile(`\A(?i:private-token)["']?\s*[:=]\s*["']?[A-Za-z0-9_.\-]{8,}`),
		keep: func(m []byte) int { return bytes.LastIndexAny(m, " \t:=\"'") + 1 },
	},
	{ // a password inside a URL: scheme://user:password@host keeps scheme://user:
		prefix: "://",
		re:     regexp.MustCompile(`\A://[^\s/?#@:"'<>\\]*:[^\s/?#@"'<>\\]+@`),
		keep:   func(m []byte) int { return bytes.IndexByte(m[3:], ':') + 4 },
	},
	{ // --password X, --api-token=X, -token X, --hf-token 'X' on a command line
		prefix: "-", fold: true,
		re:   regexp.MustCompile(`\A--?[a-z0-9_\-]*` + flagWord + `(?:=|[ \t]+)["']?[^\s"'\-][^\s"']*`),
		keep: func(m []byte) int { return flagValue.FindIndex(m)[1] },
	},
}

// flagWord is how a secret-carrying flag's name ends: --hf-token, --api-key,
// --db-password; not --tokenizer-path, --max-tokens or --key-file.
const flagWord = `(?:token|password|passwd|passphrase|secret|api[_\-]?key|access[_\-]?key|secret[_\-]?key|private[_\-]?key|auth|credentials?|cookie)`

var flagValue = regexp.MustCompile(`\A--?[A-Za-z0-9_\-]*(?:=|[ \t]+)["']?`)

// flagName is a flag whose next argument is a secret (argv as a list).
var flagName = regexp.MustCompile(`(?i)\A--?[a-z0-9_\-]*` + flagWord + `\z`)

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// span is a secret's position in a buffer.
type span struct{ start, end, keep int } // keep: bytes at start left visible (a header's scheme)

func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// findShapes returns the token-shaped secrets in b.
func findShapes(b []byte, spans []span) []span {
	var lower []byte
	for _, sh := range shapes {
		hay := b
		if sh.fold {
			if lower == nil {
				lower = lowerASCII(b)
			}
			hay = lower
		}
		for off := 0; off < len(b); {
			i := bytes.Index(hay[off:], []byte(sh.prefix))
			if i < 0 {
				break
			}
			at := off + i
			off = at + 1
			if sh.word && at > 0 && isWordByte(b[at-1]) {
				continue
			}
			if sh.prefix == "-" && at > 0 && !isSpaceOrQuote(b[at-1]) {
				continue // only a flag that starts an argument
			}
			m := sh.re.FindIndex(b[at:])
			if m == nil {
				continue
			}
			sp := span{start: at, end: at + m[1]}
			if sh.keep != nil {
				sp.keep = sh.keep(b[at:sp.end])
			}
			if sh.prefix == "://" {
				sp.end-- // the @ stays
			}
			if sp.keep >= sp.end-sp.start {
				continue
			}
			spans = append(spans, sp)
			off = sp.end
		}
	}
	return spans
}

func isSpaceOrQuote(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '[' || c == ',' || c == '\x00' || c == '='
}

// merge sorts spans and joins the overlapping ones.
func merge(spans []span) []span {
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].start != spans[j].start {
			return spans[i].start < spans[j].start
		}
		return spans[i].end > spans[j].end
	})
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.start+sp.keep < out[n-1].end {
			if sp.end > out[n-1].end {
				out[n-1].end = sp.end
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
	values [][]byte      // each secret, and its JSON-escaped forms where they differ
	names  [][]byte      // "NAME=" of every secret-named variable: its value is masked there whatever its length
	raw    []string      // each secret as it is, for its encoded forms (findEncoded)
	prints []*printGroup // secrets known by their prints only (see Prints)
}

// minValue is the shortest secret value masked wherever it appears: masking
// "1" or "true" everywhere would wreck the evidence. Shorter values are masked
// only where they stand as their variable's value (NAME=value).
const minValue = 6

// New builds a Redactor from an environment (KEY=VALUE strings): every value of
// a secret-looking name becomes a literal to mask.
func New(environ []string) *Redactor {
	r := &Redactor{}
	r.Add(environ...)
	return r
}

// Add adds more KEY=VALUE secrets (the config file's credentials).
func (r *Redactor) Add(environ ...string) {
	seen := map[string]bool{}
	for _, v := range r.values {
		seen[string(v)] = true
	}
	seenName := map[string]bool{}
	for _, n := range r.names {
		seenName[string(n)] = true
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !IsSecretName(k) || v == "" {
			continue
		}
		if !seenName[k+"="] {
			seenName[k+"="] = true
			r.names = append(r.names, []byte(k+"="))
		}
		if len(v) < minValue {
			continue
		}
		if !seen[v] {
			r.raw = append(r.raw, v)
		}
		for _, form := range forms(v) {
			if !seen[form] {
				seen[form] = true
				r.values = append(r.values, []byte(form))
			}
		}
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

// forms is a value as it may appear in a file: raw, and JSON-escaped the
// way encoding/json writes it (with and without HTML escapes), so that a
// secret holding & < > " \ or a control character is found in manifest.json too.
func forms(v string) []string {
	out := []string{v}
	var b bytes.Buffer
	for _, html := range []bool{true, false} {
		b.Reset()
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			s := strings.TrimSuffix(b.String(), "\n")
			s = s[1 : len(s)-1]
			if s != v && !contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// find returns every secret in b, sorted, overlaps joined.
func (r *Redactor) find(b []byte) []span {
	var spans []span
	for _, v := range r.values {
		for off := 0; ; {
			i := bytes.Index(b[off:], v)
			if i < 0 {
				break
			}
			spans = append(spans, span{start: off + i, end: off + i + len(v)})
			off += i + len(v)
		}
	}
	for _, n := range r.names {
		for off := 0; ; {
			i := bytes.Index(b[off:], n)
			if i < 0 {
				break
			}
			at := off + i
			off = at + len(n)
			if at > 0 && isWordByte(b[at-1]) {
				continue // FOO_HF_TOKEN= is another variable
			}
			start, end := off, valueEnd(b, off)
			if end-start >= 2 && (b[start] == '"' || b[start] == '\'') && b[end-1] == b[start] {
				start, end = start+1, end-1
			}
			if end > start {
				spans = append(spans, span{start: start, end: end})
			}
		}
	}
	spans = findEncoded(b, r.raw, spans)
	spans = r.findPrints(b, spans)
	spans = findShapes(b, spans)
	// What is already masked is no secret: a bundle read back must not be
	// refused for its own [REDACTED] (NAME=[REDACTED], --token [REDACTED]).
	out := spans[:0]
	for _, sp := range spans {
		if !bytes.HasPrefix(b[sp.start+sp.keep:], []byte(Mask)) {
			out = append(out, sp)
		}
	}
	return merge(out)
}

// valueEnd is where a NAME=value's value ends: at a space, a quote, a NUL
// or a line end; a quoted value at its closing quote.
func valueEnd(b []byte, i int) int {
	if i < len(b) && (b[i] == '"' || b[i] == '\'') {
		q := b[i]
		if j := bytes.IndexByte(b[i+1:], q); j >= 0 {
			nl := bytes.IndexByte(b[i+1:], '\n')
			if nl < 0 || j < nl {
				return i + 1 + j + 1
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' && b[j] != '"' && b[j] != '\'' && b[j] != 0 && b[j] != '\\' {
		j++
	}
	return j
}

// apply writes b with spans masked.
func apply(b []byte, spans []span) []byte {
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

// Bytes returns b with every secret masked. b is not modified.
func (r *Redactor) Bytes(b []byte) []byte { return apply(b, r.find(b)) }

// Chunk masks one piece of a stream cut at arbitrary places: it returns the
// masked bytes to emit and how many bytes of b they stand for. When !last,
// bytes that might begin a secret continuing in the next piece are held back
// (up to MaxSecret): the caller passes them again at the front of the next
// piece, so a secret straddling a cut is still seen whole.
func (r *Redactor) Chunk(b []byte, last bool) (out []byte, used int) {
	cut, spans := cutAt(b, r.find(b), last)
	return apply(b[:cut], spans), cut
}

// cutAt is where a piece of a stream may be cut: secrets found crossing the
// cut are whole here and go with it; one that reaches the end of the piece
// may go on, so the cut moves before it. spans is returned limited to b[:cut].
func cutAt(b []byte, spans []span, last bool) (int, []span) {
	if last {
		return len(b), spans
	}
	cut := max(len(b)-MaxSecret, 0)
	n := 0
	for _, sp := range spans {
		if sp.start >= cut {
			break
		}
		if sp.end > cut {
			if sp.end >= len(b) {
				cut = sp.start
				break
			}
			cut = sp.end
		}
		n++
	}
	return cut, spans[:n]
}

// scanPiece is how much of a stream Scan looks at at a time.
const scanPiece = 1 << 20

// Scan reads rd to its end and calls hit with the 1-based number of each
// line holding a secret (once per line), in order, in bounded memory: what
// upload's last check runs over each file of a bundle.
func (r *Redactor) Scan(rd io.Reader, hit func(line int)) error {
	buf := make([]byte, 0, scanPiece+MaxSecret)
	chunk := make([]byte, scanPiece)
	line, lastHit := 1, 0
	need, eof := scanPiece, false
	for {
		for !eof && len(buf) < need {
			n, err := rd.Read(chunk)
			buf = append(buf, chunk[:n]...)
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		last := eof || len(buf) >= 4*scanPiece
		cut, spans := cutAt(buf, r.find(buf), last)
		pos := 0
		for _, sp := range spans {
			o := sp.start + sp.keep
			line += bytes.Count(buf[pos:o], []byte("\n"))
			pos = o
			if line != lastHit {
				hit(line)
				lastHit = line
			}
		}
		line += bytes.Count(buf[pos:cut], []byte("\n"))
		buf = append(buf[:0], buf[cut:]...)
		need = scanPiece
		if cut == 0 {
			need = len(buf) + scanPiece
		}
		if eof && len(buf) == 0 {
			return nil
		}
	}
}

// String is Bytes for strings.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

// Args masks an argv: every argument as String does, and the argument that
// follows a secret-named flag (--password X, --hf-token X).
func (r *Redactor) Args(args []string) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		if i > 0 && flagName.MatchString(args[i-1]) && a != "" && !strings.HasPrefix(a, "-") {
			out[i] = Mask
			continue
		}
		out[i] = r.String(a)
	}
	return out
}

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
	var lines []int
	line, pos := 1, 0
	for _, sp := range r.find(b) {
		o := sp.start + sp.keep
		line += bytes.Count(b[pos:o], []byte("\n"))
		pos = o
		if len(lines) == 0 || lines[len(lines)-1] != line {
			lines = append(lines, line)
		}
	}
	return lines
}
