package triage

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/software"
)

// detailKeys reads the keys package detail declares, by type, from its
// source, so that a key added there is checked here without a list to keep.
func detailKeys(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../evidence/detail/detail.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			typ, ok := v.Type.(*ast.Ident)
			if !ok || len(v.Values) != 1 {
				t.Fatalf("detail: const %s: want `Name Type = \"key\"`", v.Names[0])
			}
			lit, ok := v.Values[0].(*ast.BasicLit)
			if !ok {
				t.Fatalf("detail: const %s: not a string literal", v.Names[0])
			}
			k, _ := strconv.Unquote(lit.Value)
			if prev, dup := keys[k]; dup {
				t.Fatalf("detail: key %q declared twice (%s, %s)", k, prev, typ.Name)
			}
			keys[k] = typ.Name
		}
	}
	return keys
}

// TestDetailKeysHoldTheirTypes runs the parsers and the verdict over real
// logs (testdata/unseen, two kernel-API logs, the corpus in testdata/corpus)
// and checks that each key of package detail holds what its type
// promises: an Int key an int64, a Bool key a bool, a Text key a scalar (a
// list would read as ""). A writer that changes what it stores under a key
// breaks here, not in a verdict line that quietly loses a field.
func TestDetailKeysHoldTheirTypes(t *testing.T) {
	keys := detailKeys(t)
	if len(keys) < 40 {
		t.Fatalf("detail declares %d keys; the parse of detail.go went wrong", len(keys))
	}
	seen := map[string]int{}
	check := func(name string, in Input) {
		fs := append(in.Findings, Decide(in).Findings...)
		for _, f := range fs {
			for k, v := range f.Details {
				typ, ok := keys[k]
				if !ok {
					continue
				}
				seen[k]++
				switch v.(type) {
				case int64:
					ok = typ == "Int" || typ == "Text"
				case bool:
					ok = typ == "Bool" || typ == "Text"
				case string, int, float64:
					ok = typ == "Text"
				default:
					ok = false
				}
				if !ok {
					t.Errorf("%s: %s finding: detail %q (a detail.%s) holds %T %v", name, f.Kind, k, typ, v, v)
				}
			}
		}
	}
	scan := func(name, text string) {
		fs, err := ScanEvidenceText(strings.NewReader(text), name, 2025)
		if err != nil {
			t.Fatal(err)
		}
		check(name, Input{Findings: fs})
	}
	for _, split := range []string{"dev", "heldout", "heldout2", "heldout3"} {
		for _, s := range loadUnseen(t, split) {
			scan(split+"/"+s.name, s.text)
		}
	}
	for _, p := range []string{"7c-level5-nonfinite.log", "7a-level1-rocm-exception.log"} {
		check(p, Input{Signal: "SIGABRT", KernelAPI: vdKernelAPI(t, filepath.Join("..", "kernelapi", "testdata", p))})
	}
	// The software collector's build problems, read from a recorded ROCm host.
	check("software", Input{Signal: "SIGSEGV", Findings: software.Findings(softwareFixtureReport(t))})
	// The repository's copy of the corpus (a missing one is a failure).
	paths := testcorpus.Glob(t, "*/*.txt")
	for _, p := range paths {
		rel, _ := filepath.Rel(testcorpus.Dir(t), p)
		scan(rel, lsCorpus(t, filepath.ToSlash(rel)))
	}
	corpus := fmt.Sprintf("%d corpus files", len(paths))
	var unseen []string
	for k := range keys {
		if seen[k] == 0 {
			unseen = append(unseen, k)
		}
	}
	sort.Strings(unseen)
	t.Logf("%s; %d of %d keys seen; not seen: %v", corpus, len(keys)-len(unseen), len(keys), unseen)
	// Most keys must show up, or the samples no longer exercise the writers.
	if len(unseen) > len(keys)/3 {
		t.Errorf("only %d of %d detail keys seen", len(keys)-len(unseen), len(keys))
	}
}

// softwareFixtureReport is the software report of the recorded ROCm host in
// software/testdata: a torch built for ROCm 6.0 under ROCm 7.1.1.
func softwareFixtureReport(t *testing.T) *software.Report {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "software", "testdata", "hosts", "rocm"))
	if err != nil {
		t.Fatal(err)
	}
	r := software.Roots{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), FS: root}
	pkgs, dirs, _ := software.ReadPackages(context.Background(), r, []string{"/venv/lib/python3.12/site-packages"}, software.DefaultLimits)
	rep := &software.Report{Runtime: software.ReadRuntime(r), Python: []software.Python{{Executable: "/venv/bin/python3", Packages: pkgs, SiteDirs: dirs}}}
	rep.Issues = software.Check(rep)
	if len(rep.Issues) == 0 {
		t.Fatal("the ROCm fixture host shows no build problem")
	}
	return rep
}
