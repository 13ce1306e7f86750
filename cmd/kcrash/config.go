package main

import (
	"errors"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kcrash/kcrash/configs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// userConfig is ~/.config/kcrash/config.yaml or --config FILE. Keys mirror
// the flags; credentials feed `kcrash upload` so tokens never go on a command line.
type userConfig struct {
	Profile          stringList                 `yaml:"profile"`
	Level            *int                       `yaml:"level"`
	Out              string                     `yaml:"out"`
	Ring             string                     `yaml:"ring"`
	Collect          string                     `yaml:"collect"`
	CollectorTimeout string                     `yaml:"collector_timeout"`
	KillAfter        string                     `yaml:"kill_after"`
	HangTimeout      string                     `yaml:"hang_timeout"`
	Env              map[string]string          `yaml:"env"`
	Collectors       []string                   `yaml:"collectors"`
	SkipCollectors   []string                   `yaml:"skip_collectors"`
	Upload           string                     `yaml:"upload"`
	Profiles         map[string]configs.Profile `yaml:"profiles"`
	Signatures       string                     `yaml:"signatures"`
	Credentials      map[string]string          `yaml:"credentials"`

	file string
}

// stringList accepts "a,b" or a YAML list.
type stringList []string

func (s *stringList) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		*s = splitList(one)
		return nil
	}
	var many []string
	if err := unmarshal(&many); err != nil {
		return err
	}
	*s = many
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// loadConfig reads --config (which must exist) or else the default file (which may not).
func loadConfig(explicit string) (*userConfig, error) {
	path := explicit
	if path == "" {
		path = os.Getenv("KCRASH_CONFIG")
		explicit = path
	}
	if path == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return &userConfig{}, nil
		}
		path = filepath.Join(dir, "kcrash", "config.yaml")
	}
	data, err := readBounded(path, configMax)
	if err != nil {
		if explicit == "" && errors.Is(err, fs.ErrNotExist) {
			return &userConfig{}, nil
		}
		return nil, fmt.Errorf("config: %v", err)
	}
	c := &userConfig{file: path}
	if err := configs.DecodeStrict(data, path, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Bounds on the files a config names: a path like /dev/zero or a huge file
// must cost one line, not the machine's memory.
const (
	configMax     = 1 << 20
	signaturesMax = 4 << 20
)

// readBounded reads a whole file of at most max bytes. A directory is an
// error; a pipe (--config <(...)) is read, up to max.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: larger than %s; not read", path, human.Bytes(max))
	}
	return data, nil
}

// applyDefaults fills every flag the user did not give from KCRASH_<FLAG>,
// then from the config file: flags win, then the environment, then the file.
func applyDefaults(flags *pflag.FlagSet, cfg *userConfig) error {
	fromFile := map[string]string{
		"profile": strings.Join(cfg.Profile, ","), "out": cfg.Out, "ring": cfg.Ring, "collect": cfg.Collect,
		"collector-timeout": cfg.CollectorTimeout, "kill-after": cfg.KillAfter, "hang-timeout": cfg.HangTimeout,
		"collectors": strings.Join(cfg.Collectors, ","), "skip-collectors": strings.Join(cfg.SkipCollectors, ","),
		"upload": cfg.Upload,
	}
	if cfg.Level != nil {
		fromFile["level"] = fmt.Sprint(*cfg.Level)
	}
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		env := "KCRASH_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, src := os.Getenv(env), env
		if v == "" {
			v, src = fromFile[f.Name], cfg.file
		}
		if v == "" {
			return
		}
		if e := f.Value.Set(v); e != nil {
			err = fmt.Errorf("%s: %s: %v", src, f.Name, e)
		}
	})
	return err
}

// configFlag adds --config to a command.
func configFlag(c *cobra.Command, p *string) {
	c.Flags().StringVar(p, "config", "", "config file (default ~/.config/kcrash/config.yaml)")
}
