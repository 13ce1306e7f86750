package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kcrash/kcrash/capture"
)

// captureConfig is where and how a command's bundles go; the config file's
// upload credentials (cfg, nil for none) are secrets wherever they show up.
func captureConfig(cfg *userConfig, out string, collectorTimeout time.Duration, budget byteSize) capture.Config {
	c := capture.Config{Out: out, CollectorTimeout: collectorTimeout, Budget: int64(budget), Version: version}
	if cfg != nil {
		for k, v := range cfg.Credentials {
			c.Secrets = append(c.Secrets, k+"="+v)
		}
	}
	return c
}

// recoverStages makes bundles of what kcrash processes killed while they
// collected left staged in c.Out (and, with private, in the private
// directory bundles fall back to, when there is one): before a command
// writes bundles there, so that no crash's evidence stays hidden.
func recoverStages(s *streams, c capture.Config, private bool) {
	capture.RecoverStages(s, c.Out, c)
	if private {
		// bundle.PrivateDir would make it; only one that exists can hold a stage
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("kcrash-%d", os.Getuid()))
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			capture.RecoverStages(s, dir, c)
		}
	}
}
