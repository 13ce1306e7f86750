package main

import (
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
