// Package execx runs external tools (nvidia-smi, rocm-smi, dmesg, scontrol)
// that may hang on a wedged GPU or a dead controller: each in its own process
// group, killed as a group at the deadline, with bounded output.
package execx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// MaxOutput caps captured stdout and stderr each.
const MaxOutput = 16 << 20

// ErrTimeout is returned (wrapped) when the tool overran its deadline and was killed.
var ErrTimeout = errors.New("timed out")

// Result is what a tool printed and how it ended.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
	Duration time.Duration
}

type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// Run runs name with args until it exits or ctx is done. On the deadline the
// whole process group gets SIGKILL and the error wraps ErrTimeout. A non-zero
// exit is not an error: the caller reads ExitCode (tools print useful text on failure).
func Run(ctx context.Context, env []string, name string, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A grandchild holding the pipe open must not keep Wait blocked (golang/go#50436).
	cmd.WaitDelay = 500 * time.Millisecond
	var out, errb capped
	out.max, errb.max = MaxOutput, MaxOutput
	cmd.Stdout, cmd.Stderr = &out, &errb
	begin := time.Now()
	err := cmd.Run()
	r := Result{Stdout: out.buf.Bytes(), Stderr: errb.buf.Bytes(), Duration: time.Since(begin), ExitCode: -1}
	if cmd.ProcessState != nil {
		r.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return r, fmt.Errorf("%s: %w after %s (killed with its process group)", name, ErrTimeout, r.Duration.Round(time.Millisecond))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return r, nil
	}
	return r, err
}
