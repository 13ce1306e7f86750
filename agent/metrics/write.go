package metrics

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"
)

// refreshEvery rewrites an unchanged file so that its mtime, which
// node_exporter exports as node_textfile_mtime_seconds, shows the agent is
// alive.
const refreshEvery = time.Minute

// WriteFile replaces dir/kcrash.prom with Render's text the way
// node_exporter needs (README, "Textfile Collector"): a temporary file in
// the same directory whose name does not end in .prom (so a scrape never
// reads it half written), synced, mode 0644, renamed over the old one.
func (m *Metrics) WriteFile(dir string) error {
	return m.write(dir, m.Render())
}

func (m *Metrics) write(dir string, b []byte) (err error) {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	tmp, err := os.CreateTemp(dir, "."+FileName+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(b); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	// CreateTemp makes 0600; node_exporter does not run as root.
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), filepath.Join(dir, FileName)); err != nil {
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
	t := time.NewTicker(every)
	defer t.Stop()
	m.tick(dir, true)
	for {
		select {
		case <-ctx.Done():
			m.tick(dir, true)
			return
		case <-t.C:
			m.tick(dir, false)
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
