package repro

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Meta is the part of a level-10 dump's metadata.json (SGLang; reference
// §3.10) that repro needs.
type Meta struct {
	FunctionName    string `json:"function_name"`
	ExecutionStatus string `json:"execution_status"`
	ProcessID       int    `json:"process_id"`
}

// ReadMeta reads dir/metadata.json (SGLang) or the last line of
// dir/metadata.jsonl (FlashInfer).
func ReadMeta(dir string) (Meta, error) {
	var m Meta
	f, err := os.Open(filepath.Join(dir, "metadata.json"))
	if err == nil {
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 16<<20))
		if err != nil {
			return m, err
		}
		return m, json.Unmarshal(b, &m)
	}
	f, err = os.Open(filepath.Join(dir, "metadata.jsonl"))
	if err != nil {
		return m, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	if err != nil {
		return m, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return m, json.Unmarshal([]byte(lines[len(lines)-1]), &m)
}

//go:embed repro.py.tmpl
var scriptTemplate string

// pyString is a Python string literal of s (JSON's escapes are Python's).
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// WriteScript writes repro.py into a level-10 dump directory: a standalone
// script that loads the dumped inputs, prints them, and calls the API at the
// dumped leading dimension M and at M=1, each in its own process. cwd is
// where the crashed command ran (put on sys.path to import the API).
func WriteScript(dumpDir, cwd string) (string, error) {
	m, err := ReadMeta(dumpDir)
	if err != nil {
		return "", fmt.Errorf("%s: metadata: %v", dumpDir, err)
	}
	if m.FunctionName == "" {
		return "", fmt.Errorf("%s: metadata names no function", dumpDir)
	}
	text := strings.NewReplacer(
		"@API@", pyString(m.FunctionName),
		"@CWD@", pyString(cwd),
		"@STATUS@", pyString(m.ExecutionStatus),
		"@PID@", strconv.Itoa(m.ProcessID),
	).Replace(scriptTemplate)
	p := filepath.Join(dumpDir, "repro.py")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return p, nil
}
