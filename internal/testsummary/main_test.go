package main

import (
	"strings"
	"testing"
)

const events = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: needs root (euid 1000): mounting\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p"}
go: downloading example.com/x v1.0.0
`

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		in         string
		failOnSkip bool
		rc         int
		want       []string
	}{
		{events, false, 0, []string{"ok  \tp\t0.01s\n", "--- SKIP: p TestB: b_test.go:9: needs root (euid 1000): mounting\n",
			"go: downloading", "tests: 1 passed, 0 failed, 1 skipped; 0 package(s) failed\n"}},
		{events, true, 1, []string{"FAIL: 1 test(s) skipped under CI=true"}},
		{strings.Replace(events, `"Action":"pass","Package":"p","Test":"TestA"`, `"Action":"fail","Package":"p","Test":"TestA"`, 1) +
			`{"Action":"fail","Package":"p"}` + "\n", false, 1,
			[]string{"--- FAIL: p TestA\n=== RUN   TestA\n", "tests: 0 passed, 1 failed, 1 skipped; 1 package(s) failed"}},
	} {
		var out strings.Builder
		if rc := run(strings.NewReader(tc.in), &out, tc.failOnSkip); rc != tc.rc {
			t.Errorf("exit %d, want %d\n%s", rc, tc.rc, out.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("output lacks %q:\n%s", w, out.String())
			}
		}
	}
}
