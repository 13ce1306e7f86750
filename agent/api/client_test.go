package api

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestSocketPath(t *testing.T) {
	t.Setenv(SocketEnv, "")
	if got := SocketPath(); got != DefaultSocket {
		t.Errorf("unset: %q", got)
	}
	t.Setenv(SocketEnv, "/tmp/x.sock")
	if got := SocketPath(); got != "/tmp/x.sock" {
		t.Errorf("set: %q", got)
	}
}

// TestNoAgent: a socket path with nothing there is "no agent", not a failure.
func TestNoAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := New(filepath.Join(t.TempDir(), "agent.sock"))
	if _, err := c.Kmsg(ctx, KmsgQuery{Since: time.Now()}); !errors.Is(err, ErrNoAgent) {
		t.Errorf("Kmsg: %v", err)
	}
	if err := c.Crash(ctx, CrashNotice{Verdict: "x"}); !errors.Is(err, ErrNoAgent) {
		t.Errorf("Crash: %v", err)
	}
}
