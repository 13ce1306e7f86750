package collectors

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A line of a run's kernel-API log maps to the line of the bundle's
// kernel-api.log that holds it, also when only the file's tail was kept
// and when several files share the bundle's copy.
func TestKernelAPILineMapsIntoTheBundle(t *testing.T) {
	old := KernelAPITail
	KernelAPITail = 8 << 10
	t.Cleanup(func() { KernelAPITail = old })
	dir := t.TempDir()
	var files []string
	for _, name := range []string{"a.log", "b.log"} {
		var b strings.Builder
		for i := 1; i <= 2000; i++ {
			fmt.Fprintf(&b, "%s line %d\n", name, i)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	env := NewEnv()
	env.KernelAPILogs = []string{filepath.Join(dir, "*.log")}
	out := t.TempDir()
	if err := (kernelAPICollector{}).Collect(t.Context(), env, NewOutput(out)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "kernel-api.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for _, f := range files {
		for _, orig := range []int{2000, 1990, 1900} {
			l, ok := env.KernelAPILine(f, orig)
			want := fmt.Sprintf("%s line %d", filepath.Base(f), orig)
			if !ok || l < 1 || l > len(lines) || lines[l-1] != want {
				t.Errorf("%s:%d → kernel-api.log:%d (%v), want the line %q", filepath.Base(f), orig, l, ok, want)
			}
		}
		if _, ok := env.KernelAPILine(f, 1); ok {
			t.Errorf("%s:1 was cut from the tail but maps", filepath.Base(f))
		}
	}
}
