package crashsig

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/kcrash/kcrash/configs"
)

// Row is one line of the normalisation table: what its pattern matches is
// replaced by "<Name>", keeping the pattern's pre*/post* groups.
type Row struct {
	Name    string `yaml:"name"`
	Pattern string `yaml:"pattern"`
	Doc     string `yaml:"doc"`
	Line    int    `yaml:"-"`

	re       *regexp.Regexp
	template string
}

// Table is configs/normalize.yaml compiled.
type Table struct {
	Rows       []Row
	SkipFrames []*regexp.Regexp
}

type tableFile struct {
	Rows       []Row    `yaml:"rows"`
	SkipFrames []string `yaml:"skip_frames"`
}

var rowNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// LoadTable parses and compiles a normalisation table. Errors name the file
// and the line of the offending row.
func LoadTable(data []byte, file string) (*Table, error) {
	var f tableFile
	if err := configs.DecodeStrict(data, file, &f); err != nil {
		return nil, err
	}
	var nodes struct {
		Rows []yaml.Node `yaml:"rows"`
	}
	_ = yaml.Unmarshal(data, &nodes)
	t := &Table{}
	seen := map[string]int{}
	for i, r := range f.Rows {
		if i < len(nodes.Rows) {
			r.Line = nodes.Rows[i].Line
		}
		if !rowNameRe.MatchString(r.Name) {
			return nil, fmt.Errorf("%s: line %d: row name %q must be lower-case letters, digits and '-'", file, r.Line, r.Name)
		}
		if prev, dup := seen[r.Name]; dup {
			return nil, fmt.Errorf("%s: line %d: row %q: name already used at line %d", file, r.Line, r.Name, prev)
		}
		seen[r.Name] = r.Line
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: row %q: %v", file, r.Line, r.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%s: line %d: row %q: pattern matches the empty string", file, r.Line, r.Name)
		}
		var pre, post strings.Builder
		for _, g := range re.SubexpNames() {
			switch {
			case strings.HasPrefix(g, "pre"):
				pre.WriteString("${" + g + "}")
			case strings.HasPrefix(g, "post"):
				post.WriteString("${" + g + "}")
			}
		}
		r.re, r.template = re, pre.String()+"<"+r.Name+">"+post.String()
		t.Rows = append(t.Rows, r)
	}
	for i, p := range f.SkipFrames {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: skip_frames[%d]: %v", file, i, err)
		}
		t.SkipFrames = append(t.SkipFrames, re)
	}
	return t, nil
}

// maxPasses bounds the fixpoint: each pass only ever shortens or keeps a
// text's volatile parts, so a table that needs more is a table bug.
const maxPasses = 8

// Normalize replaces what varies between occurrences of one bug: each row
// until it changes nothing (a row's context groups consume the separator
// between two adjacent matches, so one pass can leave the second), then the
// whole table again until a pass changes nothing.
func (t *Table) Normalize(s string) string {
	for range maxPasses {
		before := s
		for i := range t.Rows {
			s = t.Rows[i].apply(s)
		}
		if s == before {
			break
		}
	}
	return s
}

func (r *Row) apply(s string) string {
	for range maxPasses {
		next := r.re.ReplaceAllString(s, r.template)
		if next == s {
			break
		}
		s = next
	}
	return s
}

// Skip says whether a frame ("module/path.py:function") is on the skip list.
func (t *Table) Skip(frame string) bool {
	for _, re := range t.SkipFrames {
		if re.MatchString(frame) {
			return true
		}
	}
	return false
}

var builtin = sync.OnceValue(func() *Table {
	data, err := configs.FS.ReadFile("normalize.yaml")
	if err == nil {
		var t *Table
		if t, err = LoadTable(data, "normalize.yaml"); err == nil {
			return t
		}
	}
	// The embedded file is tested; reaching this means a broken build.
	panic("kcrash: embedded normalize.yaml: " + err.Error())
})

// Builtin is the table embedded from configs/normalize.yaml.
func Builtin() *Table { return builtin() }
