package report

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/bucket"
	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/source"
)

// `kcrash buckets --html` in a real headless Chromium: the page of a small
// fleet written by kcrash's own writer loads nothing, logs nothing, runs no
// script, and shows one row per bucket and per hardware-suspect GPU with
// the class the report gives.
func TestBrowserBucketsPage(t *testing.T) {
	c := startBrowser(t)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var sums []index.Summary
	if _, err := (source.Walk{Put: func(s []index.Summary) error { sums = append(sums, s...); return nil }}).Run(context.Background(), []string{fleettest.Mixed(t, now)}); err != nil {
		t.Fatal(err)
	}
	rep := bucket.Group(sums, bucket.Options{Now: now, Since: now.Add(-7 * 24 * time.Hour)})
	page, err := BucketsPage(&rep, len(sums), 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "buckets.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	v, _ := checkPage(t, c, path)
	var got struct {
		Classes []string `json:"classes"`
		GPUs    []string `json:"gpus"`
		Scripts int      `json:"scripts"`
		Width   float64  `json:"width"`
	}
	c.eval(v, `(() => ({
	  classes: [...document.querySelectorAll('#buckets tr td.role')].map(td => td.textContent),
	  gpus: [...document.querySelectorAll('#gpus tr td:first-child')].map(td => td.textContent),
	  scripts: document.scripts.length,
	  width: document.querySelector('#buckets').getBoundingClientRect().width,
	}))()`, &got)
	if len(got.Classes) != len(rep.Buckets) {
		t.Fatalf("%d bucket rows on the page, %d buckets", len(got.Classes), len(rep.Buckets))
	}
	for i, b := range rep.Buckets {
		if got.Classes[i] != b.Class {
			t.Errorf("row %d: class %q, want %q", i, got.Classes[i], b.Class)
		}
	}
	var hw []string
	for _, g := range rep.GPUs {
		if g.Class == bucket.Hardware {
			hw = append(hw, g.ID)
		}
	}
	if len(got.GPUs) != len(hw) || len(hw) != 2 {
		t.Errorf("GPU rows %v, hardware-suspect %v", got.GPUs, hw)
	}
	if got.Scripts != 0 || got.Width < 400 {
		t.Errorf("%d scripts, table %.0f px wide", got.Scripts, got.Width)
	}
	shot := filepath.Join(screenshotDir(t), "buckets-mixed-fleet.png")
	c.screenshot(v, shot)
	t.Logf("screenshot of kcrash buckets --html: %s", shot)
}
