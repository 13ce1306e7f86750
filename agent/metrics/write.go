package metrics

import (
	"bytes"
	"context"
	"time"

	"github.com/kcrash/kcrash/internal/kmsg"
	"github.com/kcrash/kcrash/internal/textfile"
)

// refreshEvery rewrites an unchanged file so that its mtime, which
// node_exporter exports as node_textfile_mtime_seconds, shows the agent is
// alive.
const refreshEvery = time.Minute

// WriteFile replaces dir/kcrash.prom with Render's text, atomically
// (textfile.Write).
func (m *Metrics) WriteFile(dir string) error {
	return m.write(dir, m.Render())
}

func (m *Metrics) write(dir string, b []byte) error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if err := textfile.Write(dir, FileName, b); err != nil {
		return err
	}
	m.lastBytes, m.lastWrite = b, time.Now()
	return nil
}

// Run writes the file at once, then every `every` when its text changed
// (so a burst of kernel records costs one write per period, not one per
// record) and at least every minute, and once more when ctx ends. A failed
// write (the directory is missing until node_exporter is installed) is
// logged once and tried again next period: the agent's other work does not
// depend on it.
func (m *Metrics) Run(ctx context.Context, dir string, every time.Duration) {
	if every <= 0 {
		every = 2 * time.Second
	}
	// On the grid of kmsg.UntilTick, as the tracker's scans and a flood's
	// reads: one wakeup of the agent for all of them.
	t := time.NewTimer(kmsg.UntilTick(time.Now(), every))
	defer t.Stop()
	m.tick(dir, true)
	for {
		select {
		case <-ctx.Done():
			m.tick(dir, true)
			return
		case <-t.C:
			m.tick(dir, false)
			t.Reset(kmsg.UntilTick(time.Now(), every))
		}
	}
}

func (m *Metrics) tick(dir string, force bool) {
	b := m.Render()
	m.writeMu.Lock()
	same := bytes.Equal(b, m.lastBytes) && time.Since(m.lastWrite) < refreshEvery
	m.writeMu.Unlock()
	if same && !force {
		return
	}
	err := m.write(dir, b)
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if err != nil && (m.lastErr == nil || m.lastErr.Error() != err.Error()) {
		m.cfg.Logger.Warn("metrics: cannot write "+FileName, "dir", dir, "err", err)
	}
	m.lastErr = err
}

// WriteError is the last write's error, nil after a good one.
func (m *Metrics) WriteError() error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	return m.lastErr
}
