package configs

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/kcrash/kcrash/internal/suggest"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Profile is one environment preset.
type Profile struct {
	Description string            `yaml:"description"`
	Env         map[string]string `yaml:"env"`
	Logs        []string          `yaml:"logs"` // kernel-API log globs, with {workdir}
	// PythonStacks: kcrash run gives the child's Python processes a
	// faulthandler dump on a signal, for the Python stacks of a hang.
	PythonStacks bool `yaml:"python_stacks"`
}

// DefaultProfile is used when the user names none.
const DefaultProfile = "sglang"

// Profiles returns the embedded profiles merged with extra ones (a user
// profile of the same name replaces the embedded one).
func Profiles(extra map[string]Profile) (map[string]Profile, error) {
	data, err := FS.ReadFile("profiles.yaml")
	if err != nil {
		return nil, err
	}
	var ps map[string]Profile
	if err := DecodeStrict(data, "profiles.yaml", &ps); err != nil {
		return nil, err
	}
	for k, v := range extra {
		ps[k] = v
	}
	return ps, nil
}

// ProfileNames lists profile names, the default first.
func ProfileNames(ps map[string]Profile) []string {
	var names []string
	for n := range ps {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == DefaultProfile) != (names[j] == DefaultProfile) {
			return names[i] == DefaultProfile
		}
		return names[i] < names[j]
	})
	return names
}

// Resolved is the environment a run gives its child.
type Resolved struct {
	Env  []string          // the child's full environment
	Set  map[string]string // what kcrash set or overrode
	Kept map[string]string // profile variables the user had set; left alone
	Logs []string          // kernel-API log globs, expanded
	// PythonStacks: a chosen profile asks for the Python-stacks hook.
	PythonStacks bool
}

// Resolve composes profiles (in order: a later one wins on the same
// variable), expands {workdir} and {level}, and applies them to base without
// overriding what the user already set, except variables named in overrides
// (--env), which always win.
func Resolve(ps map[string]Profile, names []string, level int, workdir string, base []string, overrides []string) (*Resolved, error) {
	want := map[string]string{}
	var order []string
	r := &Resolved{Set: map[string]string{}, Kept: map[string]string{}}
	expand := func(s string) string {
		s = strings.ReplaceAll(s, "{workdir}", workdir)
		return strings.ReplaceAll(s, "{level}", strconv.Itoa(level))
	}
	for _, n := range names {
		p, ok := ps[n]
		if !ok {
			return nil, fmt.Errorf("unknown profile %q (known: %s)", n, strings.Join(ProfileNames(ps), ", "))
		}
		if n == "none" && len(names) > 1 {
			continue
		}
		keys := make([]string, 0, len(p.Env))
		for k := range p.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, seen := want[k]; !seen {
				order = append(order, k)
			}
			want[k] = expand(p.Env[k])
		}
		for _, g := range p.Logs {
			r.Logs = append(r.Logs, expand(g))
		}
		r.PythonStacks = r.PythonStacks || p.PythonStacks
	}
	env := map[string]string{}
	var envOrder []string
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; !dup {
			envOrder = append(envOrder, k)
		}
		env[k] = v
	}
	for _, k := range order {
		if v, ok := env[k]; ok {
			r.Kept[k] = v
			continue
		}
		env[k] = want[k]
		envOrder = append(envOrder, k)
		r.Set[k] = want[k]
	}
	for _, kv := range overrides {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
		if _, ok := env[k]; !ok {
			envOrder = append(envOrder, k)
		}
		env[k] = v
		r.Set[k] = v
		delete(r.Kept, k)
	}
	// A user's own SGLANG_KERNEL_API_LOGDEST still has to be found.
	for _, k := range []string{"SGLANG_KERNEL_API_LOGDEST", "FLASHINFER_LOGDEST"} {
		if v, ok := r.Kept[k]; ok && v != "stdout" && v != "stderr" {
			r.Logs = append(r.Logs, strings.ReplaceAll(v, "%i", "*"))
		}
		if v, ok := r.Set[k]; ok && strings.Contains(v, "/") && !containsPattern(r.Logs, v) {
			r.Logs = append(r.Logs, strings.ReplaceAll(v, "%i", "*"))
		}
	}
	for _, k := range envOrder {
		r.Env = append(r.Env, k+"="+env[k])
	}
	return r, nil
}

func containsPattern(globs []string, dest string) bool {
	d := strings.ReplaceAll(dest, "%i", "*")
	for _, g := range globs {
		if g == d {
			return true
		}
	}
	return false
}

// MaxKeys is the most keys one mapping of a config may hold. yaml.v3 checks
// a mapping's keys for duplicates pairwise (quadratic: 40,000 keys take
// seconds); kcrash checks them itself in linear time and refuses mappings no
// real config needs, before yaml.v3 sees them.
const MaxKeys = 4096

// DecodeStrict decodes YAML into v, rejecting unknown keys, duplicate keys,
// oversized mappings and a second document; errors name the file and line
// ("config.yaml: line 3: unknown key \"colect\"").
func DecodeStrict(data []byte, file string, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file is an empty config
		}
		return fmt.Errorf("%s: %s", file, cleanYAMLError(err))
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case err == nil && !emptyDoc(&more):
		return fmt.Errorf("%s: line %d: a second YAML document (after ---); a config is one document", file, max(more.Line, 1))
	case err != nil && !errors.Is(err, io.EOF):
		return fmt.Errorf("%s: %s", file, cleanYAMLError(err))
	}
	if err := checkKeys(&doc); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(v); err != nil {
		return fmt.Errorf("%s: %s", file, suggestKeys(cleanYAMLError(err), v))
	}
	return nil
}

// suggestKeys adds to each `unknown key "K" in T` of msg the key of T that
// K was most likely meant to be.
func suggestKeys(msg string, v any) string {
	keys := map[string][]string{}
	yamlKeys(reflect.TypeOf(v), keys)
	return unknownKeyRe.ReplaceAllStringFunc(msg, func(m string) string {
		sub := unknownKeyRe.FindStringSubmatch(m)
		if near := suggest.Nearest(sub[1], keys[sub[2]]); near != "" {
			return fmt.Sprintf("unknown key %q (did you mean %q?)", sub[1], near)
		}
		return fmt.Sprintf("unknown key %q", sub[1])
	})
}

var unknownKeyRe = regexp.MustCompile(`unknown key "([^"]*)" in type (\S+)`)

// yamlKeys records the yaml keys of t and of the struct types inside it,
// by type name as yaml's errors print it ("main.userConfig").
func yamlKeys(t reflect.Type, out map[string][]string) {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return
	}
	if _, done := out[t.String()]; done {
		return
	}
	out[t.String()] = nil
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[t.String()] = append(out[t.String()], name)
		yamlKeys(f.Type, out)
	}
}

// emptyDoc: a trailing "---" with nothing after it.
func emptyDoc(n *yaml.Node) bool {
	return len(n.Content) == 0 || len(n.Content) == 1 && n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null" && n.Content[0].Value == ""
}

// checkKeys walks a document once: no mapping over MaxKeys, no key twice.
func checkKeys(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		if len(n.Content)/2 > MaxKeys {
			return fmt.Errorf("line %d: a mapping of %d keys; at most %d are read", n.Line, len(n.Content)/2, MaxKeys)
		}
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && k.Tag != "!!merge" && k.Value != "<<" {
				if at, dup := seen[k.Value]; dup {
					return fmt.Errorf("line %d: key %q already defined at line %d", k.Line, k.Value, at)
				}
				seen[k.Value] = k.Line
			}
		}
	}
	for _, c := range n.Content {
		if err := checkKeys(c); err != nil {
			return err
		}
	}
	return nil
}

// cleanYAMLError turns yaml.v3's "yaml: unmarshal errors:\n  line 3: field x
// not found in type main.T" into "line 3: unknown key \"x\"".
func cleanYAMLError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if i := strings.Index(l, "field "); i >= 0 && strings.Contains(l, " not found in type") {
			name := l[i+len("field ") : strings.Index(l, " not found in type")]
			typ := strings.TrimSpace(l[strings.Index(l, " not found in type")+len(" not found in type"):])
			l = l[:i] + fmt.Sprintf("unknown key %q in type %s", name, typ)
		}
		if j := strings.Index(l, " into "); j >= 0 && strings.Contains(l, "cannot unmarshal") {
			l = l[:j] + " into the expected type"
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}
