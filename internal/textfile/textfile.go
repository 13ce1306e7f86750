// Package textfile writes Prometheus series the way node_exporter's textfile
// collector reads them: families sorted by name with one HELP and TYPE each,
// series sorted by labels, no timestamps (node_exporter skips a file that has
// any), and the file replaced atomically so a scrape never reads half of it.
// The node agent's kcrash.prom and `kcrash buckets --textfile-dir` both
// write through it.
package textfile

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Family is a metric's HELP text and TYPE (counter, gauge).
type Family struct {
	Help, Type string
}

// Sample is one series: a metric name, its labels rendered by Labels ("" for
// none), and its value.
type Sample struct {
	Name   string
	Labels string
	Value  float64
}

// Render writes the samples in the text format. Every name must have a
// family: node_exporter refuses a file whose metric comes with two HELP
// strings, so HELP lives in one table, and a name without one is a bug.
func Render(ss []Sample, families map[string]Family) []byte {
	ss = append([]Sample(nil), ss...)
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].Name != ss[j].Name {
			return ss[i].Name < ss[j].Name
		}
		return ss[i].Labels < ss[j].Labels
	})
	var b bytes.Buffer
	for i, s := range ss {
		if i == 0 || ss[i-1].Name != s.Name {
			fam, ok := families[s.Name]
			if !ok {
				panic("textfile: no HELP for " + s.Name)
			}
			fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", s.Name, EscapeHelp(fam.Help), s.Name, fam.Type)
		}
		b.WriteString(s.Name)
		b.WriteString(s.Labels)
		b.WriteByte(' ')
		b.WriteString(FormatValue(s.Value))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Labels renders name/value pairs as {a="x",b="y"}, sorted by name as
// Prometheus itself writes them; a pair with an empty value is left out
// (Prometheus reads an empty label as no label). No pairs give "".
func Labels(kv ...string) string {
	type pair struct{ k, v string }
	ps := make([]pair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			ps = append(ps, pair{kv[i], kv[i+1]})
		}
	}
	if len(ps) == 0 {
		return ""
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].k < ps[j].k })
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.k)
		b.WriteString(`="`)
		b.WriteString(EscapeLabel(p.v))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// The text format's escapes: in label values backslash, double quote and
// newline; in HELP backslash and newline.
var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// EscapeLabel escapes a label value.
func EscapeLabel(s string) string { return labelEscaper.Replace(s) }

// EscapeHelp escapes a HELP text.
func EscapeHelp(s string) string { return helpEscaper.Replace(s) }

// FormatValue writes a value as the text format spells it (NaN, +Inf, -Inf).
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Write replaces dir/name with b the way node_exporter needs (its README,
// "Textfile Collector"): a temporary file in the same directory whose name
// does not end in .prom (so a scrape never reads it half written), synced,
// mode 0644 (node_exporter does not run as root), renamed over the old one.
func Write(dir, name string, b []byte) (err error) {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(b); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}
