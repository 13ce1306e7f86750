package collectors

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/kcrash/kcrash/internal/readas"
)

// KernelAPITail caps kernel-api.log: the last calls before a crash are what
// matter, and a level-3 log of a server can reach gigabytes.
var KernelAPITail int64 = 8 << 20

func init() {
	Register(Info{Name: "kernel-api", Description: "tail of every SGLang/FlashInfer kernel-API log file of the run, as kernel-api.log", Default: true},
		func() Collector { return kernelAPICollector{} })
}

type kernelAPICollector struct{}

// KernelAPIFiles expands the run's kernel-API log globs (per-pid %i files
// included), oldest modification first.
func KernelAPIFiles(globs []string) []string {
	seen := map[string]bool{}
	var files []string
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		for _, f := range m {
			if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return mtime(files[i]) < mtime(files[j]) })
	return files
}

// KernelAPIFilesAs is KernelAPIFiles with id's rights (OpenAs): the globs
// come from a job's environment, and root must not list for it the names in
// directories its user could not list.
func KernelAPIFilesAs(id *Identity, globs []string) []string {
	var files []string
	readas.Do(id, func() error {
		files = KernelAPIFiles(globs)
		return nil
	})
	return files
}

func mtime(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixNano()
}

func (kernelAPICollector) Collect(ctx context.Context, env *Env, out *Output) error {
	files := KernelAPIFilesAs(env.ReadAs, env.KernelAPILogs)
	if len(files) == 0 {
		return Skip("no kernel-API log was written")
	}
	// Each file gets a share of the cap; a file's tail starts at a line boundary.
	share := KernelAPITail / int64(len(files))
	var buf bytes.Buffer
	for _, f := range files {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		tail, size, err := readTailLines(env.ReadAs, f, share)
		if err != nil {
			fmt.Fprintf(&buf, "==> %s: %v <==\n", f, err)
			continue
		}
		note := ""
		if int64(len(tail)) < size {
			note = fmt.Sprintf(" (last %d of %d bytes)", len(tail), size)
		}
		if len(files) > 1 {
			fmt.Fprintf(&buf, "==> %s%s <==\n", f, note)
		}
		buf.Write(tail)
		if len(tail) > 0 && tail[len(tail)-1] != '\n' {
			buf.WriteByte('\n')
		}
	}
	return out.WriteFile("kernel-api.log", buf.Bytes())
}

// readTailLines is TailFile starting at a line: a tail cut mid-line would
// show the analyser half a call header.
func readTailLines(as *Identity, path string, max int64) ([]byte, int64, error) {
	tail := TailFile
	if as != nil {
		tail = func(p string, n int64) ([]byte, int64, error) { return TailFileAs(as, p, n) }
	}
	b, size, err := tail(path, max)
	if err == nil && size > max {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b, size, err
}
