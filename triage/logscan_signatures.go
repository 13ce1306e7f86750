package triage

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/kcrash/kcrash/configs"
	"github.com/kcrash/kcrash/evidence"
)

// Signature is one plain-pattern log signature. The schema is documented at the
// top of configs/signatures.yaml. Its patterns must be compiled before use:
// LoadSignatures does it (with errors naming file and line), and NewScanner
// does it for a signature built by hand.
type Signature struct {
	Name        string            `yaml:"name"`
	Kind        evidence.Kind     `yaml:"kind"`
	Pattern     string            `yaml:"pattern"`
	Extract     []string          `yaml:"extract"`
	Details     map[string]string `yaml:"details"`
	Symptom     bool              `yaml:"symptom"`
	Description string            `yaml:"description"`

	// File and Line say where the signature was defined, for messages.
	File string `yaml:"-"`
	Line int    `yaml:"-"`

	re      *regexp.Regexp
	extract []*regexp.Regexp
	// literals holds strings of which at least one must occur in a line for re
	// to match: a cheap substring test spares running every regexp on every
	// line of a multi-gigabyte log. nil means no such test is known.
	literals []string
	bigrams  []uint16 // per literal, its least common byte pair; see mayMatch
}

type lsSignatureFile struct {
	Signatures []Signature `yaml:"signatures"`
}

var (
	sigNameRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	sigGroupRe    = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	lsReservedKey = map[string]bool{"signature": true, "symptom": true}
)

// LoadSignatures parses signature YAML (the schema of configs/signatures.yaml)
// and compiles it. Errors name the file and the line of the offending entry.
func LoadSignatures(data []byte, file string) ([]Signature, error) {
	var f lsSignatureFile
	if err := configs.DecodeStrict(data, file, &f); err != nil {
		return nil, err
	}
	// A second pass over the raw nodes only to learn each entry's line: the
	// typed decode above does not keep positions.
	var nodes struct {
		Signatures []yaml.Node `yaml:"signatures"`
	}
	_ = yaml.Unmarshal(data, &nodes)
	seen := map[string]int{}
	for i := range f.Signatures {
		s := &f.Signatures[i]
		s.File = file
		if i < len(nodes.Signatures) {
			s.Line = nodes.Signatures[i].Line
		}
		if err := s.compile(); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", file, s.Line, err)
		}
		if prev, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("%s: line %d: signature %q: name already used at line %d", file, s.Line, s.Name, prev)
		}
		seen[s.Name] = s.Line
	}
	return f.Signatures, nil
}

func (s *Signature) compile() error {
	if s.Name == "" {
		return fmt.Errorf("signature without a name")
	}
	if !sigNameRe.MatchString(s.Name) {
		return fmt.Errorf("signature %q: name must be lower-case letters, digits, '-', '_' or '.'", s.Name)
	}
	if !lsValidKind(s.Kind) {
		return fmt.Errorf("signature %q: kind %q is not one of %s", s.Name, s.Kind, lsKindList())
	}
	if s.Pattern == "" {
		return fmt.Errorf("signature %q: pattern is missing", s.Name)
	}
	re, err := lsCompileRegexp(s.Pattern)
	if err != nil {
		return fmt.Errorf("signature %q: pattern: %w", s.Name, err)
	}
	// A pattern that matches the empty string would turn every line into evidence.
	if re.MatchString("") {
		return fmt.Errorf("signature %q: pattern %q matches an empty line", s.Name, s.Pattern)
	}
	s.re = re
	s.extract = nil
	for j, p := range s.Extract {
		xre, err := lsCompileRegexp(p)
		if err != nil {
			return fmt.Errorf("signature %q: extract[%d]: %w", s.Name, j, err)
		}
		named := false
		for _, n := range xre.SubexpNames() {
			named = named || n != ""
		}
		if !named {
			return fmt.Errorf("signature %q: extract[%d] %q has no named group (?P<name>...), so it adds nothing", s.Name, j, p)
		}
		s.extract = append(s.extract, xre)
	}
	for k := range s.Details {
		if !sigGroupRe.MatchString(k) || lsReservedKey[k] {
			return fmt.Errorf("signature %q: details key %q must match [a-z_][a-z0-9_]* and not be signature/symptom", s.Name, k)
		}
	}
	s.literals = lsRequiredLiterals(s.Pattern)
	s.bigrams = make([]uint16, len(s.literals))
	for i, l := range s.literals {
		s.bigrams[i] = lsRareBigram(l)
	}
	return nil
}

func lsCompileRegexp(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	for _, n := range re.SubexpNames() {
		if n != "" && (!sigGroupRe.MatchString(n) || lsReservedKey[n]) {
			return nil, fmt.Errorf("group name %q must match [a-z_][a-z0-9_]* and not be signature/symptom", n)
		}
	}
	return re, nil
}

func lsValidKind(k evidence.Kind) bool {
	for _, v := range evidence.Kinds {
		if v == k {
			return true
		}
	}
	return false
}

func lsKindList() string {
	var s []string
	for _, k := range evidence.Kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

var lsBuiltinSigs = sync.OnceValues(func() ([]Signature, error) {
	data, err := configs.FS.ReadFile("signatures.yaml")
	if err != nil {
		return nil, err
	}
	return LoadSignatures(data, "signatures.yaml")
})

// BuiltinSignatures returns the signatures embedded from configs/signatures.yaml.
func BuiltinSignatures() []Signature {
	s, err := lsBuiltinSigs()
	if err != nil {
		// The embedded file is tested; reaching this means a broken build.
		panic("kcrash: embedded signatures.yaml: " + err.Error())
	}
	return append([]Signature(nil), s...)
}

// lsRequiredLiterals derives, from the regexp's syntax tree, a set of strings of
// which any match must contain at least one. It is conservative: when it cannot
// tell (case folding, classes, optional parts only) it returns nil.
func lsRequiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	lits := lsReqLits(re.Simplify())
	for _, l := range lits {
		if len(l) < 3 {
			return nil // too short to reject many lines; not worth the test
		}
	}
	return lits
}

func lsReqLits(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return lsReqLits(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return lsReqLits(re.Sub[0])
		}
		return nil
	case syntax.OpConcat:
		var best []string
		bestLen := 0
		for _, sub := range re.Sub {
			l := lsReqLits(sub)
			if l == nil {
				continue
			}
			if m := lsMinLen(l); m > bestLen {
				best, bestLen = l, m
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			l := lsReqLits(sub)
			if l == nil {
				return nil
			}
			all = append(all, l...)
		}
		if len(all) > 32 {
			return nil
		}
		return all
	}
	return nil
}

func lsMinLen(l []string) int {
	m := -1
	for _, s := range l {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return m
}

// mayMatch is the cheap test before the regexp. bg holds, for each byte
// pair of the line, the generation gen when the pair occurs: a literal whose
// least common pair is absent cannot occur, which spares nearly every
// strings.Contains on ordinary log lines.
func (s *Signature) mayMatch(line string, bg *lsBigrams) bool {
	if s.literals == nil {
		return true
	}
	for i, l := range s.literals {
		if bg != nil && !bg.has(s.bigrams[i]) {
			continue
		}
		if strings.Contains(line, l) {
			return true
		}
	}
	return false
}

// lsBigrams records which byte pairs a line holds, by generation so that it
// is never cleared.
type lsBigrams struct {
	gen  uint32
	seen [1 << 16]uint32
}

func (b *lsBigrams) reset(line string) {
	b.gen++
	if b.gen == 0 {
		b.seen = [1 << 16]uint32{}
		b.gen = 1
	}
	for i := 0; i+1 < len(line); i++ {
		b.seen[uint16(line[i])<<8|uint16(line[i+1])] = b.gen
	}
}

func (b *lsBigrams) has(p uint16) bool { return b.seen[p] == b.gen }

// lsRareBigram picks the byte pair of l least likely in ordinary log text:
// pairs with capitals, digits or punctuation beat pairs of common letters.
func lsRareBigram(l string) uint16 {
	if len(l) < 2 {
		return 0
	}
	score := func(c byte) int {
		switch {
		case c == ' ' || strings.IndexByte("etaoinsrhldcu", c) >= 0:
			return 4
		case c >= 'a' && c <= 'z':
			return 3
		case c >= '0' && c <= '9':
			return 2
		}
		return 1
	}
	best, bestScore := 0, 100
	for i := 0; i+1 < len(l); i++ {
		if sc := score(l[i]) + score(l[i+1]); sc < bestScore {
			best, bestScore = i, sc
		}
	}
	return uint16(l[best])<<8 | uint16(l[best+1])
}
