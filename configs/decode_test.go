package configs

import (
	"fmt"
	"strings"
	"testing"
)

type testConfig struct {
	Out         string            `yaml:"out"`
	Env         map[string]string `yaml:"env"`
	Credentials map[string]string `yaml:"credentials"`
	Profiles    map[string]Profile
}

// A second document was silently ignored; duplicate keys and
// huge mappings are refused with one line naming the file and line.
func TestDecodeStrictRefuses(t *testing.T) {
	var big strings.Builder
	big.WriteString("env:\n")
	for i := 0; i < 40000; i++ {
		fmt.Fprintf(&big, "  K%d: v\n", i)
	}
	for _, c := range []struct{ in, want string }{
		{"out: a\n---\nout: b\n", "c.yaml: line 2: a second YAML document"},
		{"out: a\n--- \n", ""}, // an empty second document is none
		{"env:\n  A: 1\n  A: 2\n", `c.yaml: line 3: key "A" already defined at line 2`},
		{big.String(), "c.yaml: line 2: a mapping of 40000 keys; at most 4096 are read"},
		{"colect: x\n", `c.yaml: line 1: unknown key "colect"`},
		{"", ""},
		{"# only a comment\n", ""},
	} {
		var v testConfig
		err := DecodeStrict([]byte(c.in), "c.yaml", &v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if c.want == "" && got != "" || c.want != "" && !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%.40q: got %q, want %q", c.in, got, c.want)
		}
	}
}

// BenchmarkDecodeStrictKeys: yaml.v3's own duplicate-key check is pairwise
// (quadratic), so the cost per key still grows below MaxKeys; the cap bounds
// the worst case (MaxKeys keys, tens of ms), and a 40,000-key mapping is
// refused after one linear pass instead of taking seconds.
func BenchmarkDecodeStrictKeys(b *testing.B) {
	for _, n := range []int{500, MaxKeys, 40000} {
		var sb strings.Builder
		sb.WriteString("env:\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&sb, "  K%d: v\n", i)
		}
		data := []byte(sb.String())
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				var v testConfig
				if err := DecodeStrict(data, "c.yaml", &v); (err != nil) != (n > MaxKeys) {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}

// FuzzDecodeStrict: no input makes the config reader panic or print a
// multi-line error.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		"out: a\nenv: {A: b}\n", "out: a\n---\nout: b\n", "env:\n  A: 1\n  A: 2\n", "a: &x [*x]\n",
		"profiles:\n  p:\n    env: {A: b}\n", "credentials:\n  GITLAB_TOKEN: x\n", "<<: {out: a}\n", "- 1\n- 2\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v testConfig
		err := DecodeStrict(data, "c.yaml", &v)
		if err != nil && !strings.HasPrefix(err.Error(), "c.yaml: ") {
			t.Fatalf("error without the file: %q", err)
		}
	})
}
