package testlock

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/kernlog"
)

// One marked record, then a test that asks for a quiet period after it:
// it starts no earlier than the margin after the record, and the record's
// every line carries the writer's marker.
func TestKmsgQuietAfterMarkedRecord(t *testing.T) {
	const margin = 300 * time.Millisecond
	var token string
	var wrote time.Time
	t.Run("writer", func(t *testing.T) {
		w := Kmsg(t)
		if got := os.Getenv(kernlog.TestMarkEnv); got != w.Token || !strings.HasPrefix(w.Mark(), "kcrash-test["+w.Token+"]: ") {
			t.Fatalf("%s=%q, mark %q, token %q", kernlog.TestMarkEnv, got, w.Mark(), w.Token)
		}
		w.Write(t, 6, "testlock quiet probe\nsecond line")
		token, wrote = w.Token, time.Now()
	})
	if token == "" {
		return // the writer skipped (not asked, not root): so does this
	}
	if os.Getenv(kernlog.TestMarkEnv) == token {
		t.Errorf("%s outlived the test that set it", kernlog.TestMarkEnv)
	}
	t.Run("quiet", func(t *testing.T) {
		w := KmsgQuiet(t, margin)
		if d := time.Since(wrote); d < margin-20*time.Millisecond {
			t.Errorf("KmsgQuiet returned %v after the last marked record, margin %v", d, margin)
		}
		if w.Token == token {
			t.Error("two tests got the same token")
		}
	})
}
