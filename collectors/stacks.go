package collectors

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kcrash/kcrash/internal/execx"
	"github.com/kcrash/kcrash/internal/procfs"
)

func init() {
	Register(Info{Name: "stacks", Description: "live processes of the tree: per-thread state, wchan and kernel stack, and py-spy dumps of Python processes (raw/stacks.txt); Python stacks of kcrash run's Python processes by faulthandler (raw/pystacks.txt)", Default: true},
		func() Collector { return stacksCollector{} })
}

// stacksCollector captures where a live tree is stuck: what a hang bundle
// is for. After a crash the tree is usually gone and it skips.
type stacksCollector struct{}

func (stacksCollector) Collect(ctx context.Context, env *Env, out *Output) error {
	if env.Tree == nil {
		return Skip("no supervised process tree")
	}
	var live []int
	for _, p := range env.Tree.Processes() {
		if _, err := os.Stat(env.Proc(strconv.Itoa(int(p.Pid)))); err == nil && !p.Exited {
			live = append(live, int(p.Pid))
		}
	}
	if len(live) == 0 {
		return Skip("no process of the tree is alive")
	}
	sort.Ints(live)
	// Python stacks first, while the processes are as kcrash found them.
	if py := pyStacks(ctx, env, live); py != nil {
		if err := out.WriteFile("raw/pystacks.txt", py); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	pyspy, _ := exec.LookPath("py-spy")
	for _, pid := range live {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		comm := readTrim(env.Proc(strconv.Itoa(pid), "comm"))
		fmt.Fprintf(&buf, "=== pid %d (%s) %s\n", pid, comm, strings.ReplaceAll(readTrim(env.Proc(strconv.Itoa(pid), "cmdline")), "\x00", " "))
		tasks, _ := filepath.Glob(env.Proc(strconv.Itoa(pid), "task", "*"))
		for _, task := range tasks {
			tid := filepath.Base(task)
			state := "?"
			// a task directory has a process's layout
			if n, err := strconv.Atoi(tid); err == nil {
				if st, err := (procfs.FS{Root: filepath.Dir(task)}).Stat(n); err == nil {
					state = string(st.State)
				}
			}
			fmt.Fprintf(&buf, "--- tid %s (%s) state %s wchan %s\n", tid, readTrim(filepath.Join(task, "comm")), state, readTrim(filepath.Join(task, "wchan")))
			if st, err := os.ReadFile(filepath.Join(task, "stack")); err == nil && len(st) > 0 {
				buf.Write(st)
			}
		}
		if pyspy != "" && strings.HasPrefix(comm, "python") {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := execx.Run(pctx, nil, pyspy, "dump", "--pid", strconv.Itoa(pid))
			cancel()
			fmt.Fprintf(&buf, "--- py-spy dump --pid %d\n", pid)
			if err != nil {
				fmt.Fprintf(&buf, "py-spy: %v\n", err)
			}
			buf.Write(r.Stdout)
			buf.Write(r.Stderr)
		}
		buf.WriteByte('\n')
	}
	return out.WriteFile("raw/stacks.txt", buf.Bytes())
}

// pyStacks dumps the Python stacks of the live processes that carry kcrash's
// hook (see pystacks.go); nil when none does.
func pyStacks(ctx context.Context, env *Env, live []int) []byte {
	var buf bytes.Buffer
	for _, pid := range live {
		file := pyDumpTarget(env, pid, env.PyStacksDir)
		if file == "" || ctx.Err() != nil {
			continue
		}
		fmt.Fprintf(&buf, "=== pid %d (%s) %s\n", pid, readTrim(env.Proc(strconv.Itoa(pid), "comm")), strings.ReplaceAll(readTrim(env.Proc(strconv.Itoa(pid), "cmdline")), "\x00", " "))
		dump, err := pyDump(ctx, pid, file)
		if err != nil {
			fmt.Fprintf(&buf, "no Python stacks: %v\n", err)
		}
		buf.Write(dump)
		buf.WriteByte('\n')
	}
	if buf.Len() == 0 {
		return nil
	}
	return buf.Bytes()
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// Available: kernel stacks need root; Python stacks need py-spy.
func (stacksCollector) Available(env *Env) (Availability, string) {
	a, why := Works, "root: kernel stacks of every thread readable"
	if os.Geteuid() != 0 {
		a, why = WorksPartly, "not root: wchan and state only, no kernel stacks"
	}
	if p, err := exec.LookPath("py-spy"); err == nil {
		return a, why + "; py-spy at " + p
	}
	return a, why + "; no py-spy in PATH (Python stacks only from kcrash run's faulthandler hook)"
}
