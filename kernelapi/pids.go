package kernelapi

// Pids. LOGDEST=kapi_%i.log gives kapi_48213.log; rotation adds .1 … .4.

import (
	"path/filepath"
	"strconv"
	"strings"
)

// pidFromName returns the last run of digits in the file name that stands
// alone (between non-alphanumerics), so that "level3" or "7a" do not count.
func pidFromName(name string) int {
	base := filepath.Base(name)
	for _, ext := range []string{".gz", ".1", ".2", ".3", ".4", ".log", ".txt", ".out"} {
		if len(base) > len(ext) && base[len(base)-len(ext):] == ext {
			base = base[:len(base)-len(ext)]
		}
	}
	pid := 0
	for i := 0; i < len(base); {
		if !isDigit(base[i]) {
			i++
			continue
		}
		j := i
		for j < len(base) && isDigit(base[j]) {
			j++
		}
		if (i == 0 || !isAlnum(base[i-1])) && (j == len(base) || !isAlnum(base[j])) && j-i <= maxNameDigits {
			if v, err := strconv.Atoi(base[i:j]); err == nil && v > 0 && v <= 1<<22 {
				pid = v
			}
		}
		i = j
	}
	return pid
}

// pidFromDumpDir reads the pid out of `<ts>_pid<PID>_<func>_call<NNNN>`.
func pidFromDumpDir(dir []byte) int {
	base := filepath.Base(string(dir))
	i := 0
	for {
		k := strings.Index(base[i:], "_pid")
		if k < 0 {
			return 0
		}
		i += k + 4
		j := i
		for j < len(base) && isDigit(base[j]) {
			j++
		}
		if j > i && j-i <= maxNameDigits && (j == len(base) || base[j] == '_') {
			v, _ := strconv.Atoi(base[i:j])
			return v
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
