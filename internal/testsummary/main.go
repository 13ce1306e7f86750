// Command testsummary reads `go test -json` on stdin and prints what a
// person reading CI needs: go test's own package lines (ok, FAIL, build
// errors), the output of every failed test, one line per skipped test with
// its reason, and a last line with the counts. It exits 1 when a test or
// package failed, or, with -fail-on-skip (CI), when any test skipped.
//
//	go test -json ./... | go run ./internal/testsummary -fail-on-skip
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

type key struct{ pkg, test string }

func main() {
	failOnSkip := flag.Bool("fail-on-skip", false, "exit 1 when any test skipped (CI)")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, *failOnSkip))
}

func run(in io.Reader, out io.Writer, failOnSkip bool) int {
	output := map[key][]string{} // a running test's output, until it ends
	var skipped, failed []string
	passed, badPkgs := 0, 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (go's own messages): show it as it is; go
			// test's exit status says whether it was a failure.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		k := key{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			badPkgs++
		case e.Test == "" && e.Action == "output":
			// The package's own lines: "ok  pkg 1.2s", "FAIL pkg", a panic
			// outside any test. The verbose framing is left out.
			if l := e.Output; !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "PASS\n") && l != "FAIL\n" {
				fmt.Fprint(out, l)
			}
		case e.Test == "" && e.Action == "fail":
			badPkgs++
		case e.Test == "":
			// start, pass, skip (no test files) of a package
		case e.Action == "output":
			output[k] = append(output[k], e.Output)
		case e.Action == "pass":
			passed++
			delete(output, k)
		case e.Action == "skip":
			skipped = append(skipped, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason(output[k])))
			delete(output, k)
		case e.Action == "fail":
			failed = append(failed, e.Package+" "+e.Test)
			fmt.Fprintf(out, "--- FAIL: %s %s\n%s", e.Package, e.Test, strings.Join(output[k], ""))
			delete(output, k)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testsummary: reading go test -json: %v\n", err)
		return 1
	}
	sort.Strings(skipped)
	for _, s := range skipped {
		fmt.Fprintln(out, "--- SKIP:", s)
	}
	fmt.Fprintf(out, "tests: %d passed, %d failed, %d skipped; %d package(s) failed\n", passed, len(failed), len(skipped), badPkgs)
	switch {
	case len(failed) > 0 || badPkgs > 0:
		return 1
	case failOnSkip && len(skipped) > 0:
		fmt.Fprintf(out, "FAIL: %d test(s) skipped under CI=true, where every test must run\n", len(skipped))
		return 1
	}
	return 0
}

// reason is the skip message a test printed: its output without the
// verbose framing ("=== RUN", "--- SKIP: ...").
func reason(lines []string) string {
	var r []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		r = append(r, t)
	}
	if len(r) == 0 {
		return "(no reason given)"
	}
	return strings.Join(r, " / ")
}
