package kernlog

import (
	"strconv"
	"strings"
)

// The helpers below scan by hand instead of with regexp: they run on every
// candidate line of logs that can be hundreds of megabytes, and regexp is an
// order of magnitude slower than a few strings.Index calls.

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

// leadingDigits splits s into its leading run of decimal digits and the rest.
func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// leadingInt parses an optionally signed decimal number at the start of s.
// Overlong numbers are rejected rather than wrapped, so garbage never turns
// into a plausible pid.
func leadingInt(s string) (v int64, rest string, ok bool) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	d, rest := leadingDigits(s)
	if d == "" || len(d) > 18 {
		return 0, rest, false
	}
	v, err := strconv.ParseInt(d, 10, 64)
	if err != nil {
		return 0, rest, false
	}
	if neg {
		v = -v
	}
	return v, rest, true
}

// leadingHex splits s into its leading hex token (an optional 0x included)
// and the rest. Underscores are accepted inside the digits because NVIDIA
// prints 64-bit addresses as 0x7f29_5b8c9000.
func leadingHex(s string) (tok, rest string) {
	i := 0
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		i = 2
	}
	j := i
	for j < len(s) && (isHex(s[j]) || (s[j] == '_' && j > i)) {
		j++
	}
	if j == i {
		return "", s
	}
	return s[:j], s[j:]
}

// hexAddr normalises a printed address to lower-case 0x form without
// separators, the one spelling triage compares across vendors.
func hexAddr(tok string) string {
	tok = strings.TrimPrefix(strings.TrimPrefix(tok, "0x"), "0X")
	tok = strings.ReplaceAll(tok, "_", "")
	if tok == "" {
		return ""
	}
	return "0x" + strings.ToLower(tok)
}

// after returns what follows the first occurrence of marker in s.
func after(s, marker string) (string, bool) {
	i := strings.Index(s, marker)
	if i < 0 {
		return "", false
	}
	return s[i+len(marker):], true
}

// intAfter parses the decimal number that follows marker.
func intAfter(s, marker string) (int64, bool) {
	rest, ok := after(s, marker)
	if !ok {
		return 0, false
	}
	v, _, ok := leadingInt(rest)
	return v, ok
}

// hexAfter returns the hex token that follows marker.
func hexAfter(s, marker string) (string, bool) {
	rest, ok := after(s, marker)
	if !ok {
		return "", false
	}
	tok, _ := leadingHex(strings.TrimLeft(rest, " "))
	return tok, tok != ""
}

// wordAfter returns the run of non-space bytes that follows marker.
func wordAfter(s, marker string) (string, bool) {
	rest, ok := after(s, marker)
	if !ok {
		return "", false
	}
	end := strings.IndexAny(rest, " \t")
	if end < 0 {
		end = len(rest)
	}
	return rest[:end], end > 0
}

// clip bounds a string kept in a finding; findings travel into JSON and
// summaries, and a 64 KiB garbage line must not travel with them.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut > n-4 && s[cut]&0xC0 == 0x80 {
		cut-- // do not split a UTF-8 sequence
	}
	return s[:cut] + "…"
}

// normBDF turns the PCI address forms drivers print (0000:9b:00,
// 00000000:9B:00.0, 9b:00.0) into the sysfs spelling 0000:9b:00.0, so a GPU is
// named the same whichever vendor or tool reported it. NVRM omits the
// function, which is 0 for every GPU it drives.
func normBDF(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 2: // bus:dev.fn
		parts = append([]string{"0000"}, parts...)
	case 3:
	default:
		return s
	}
	dom, bus, dev := parts[0], parts[1], parts[2]
	if len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	if !strings.Contains(dev, ".") {
		dev += ".0"
	}
	if !allHex(dom) || !allHex(bus) {
		return s
	}
	return dom + ":" + bus + ":" + dev
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return s != ""
}

// isBDF reports whether s starts with a full dddd:bb:dd.f PCI address.
func isBDF(s string) bool {
	if len(s) < 12 {
		return false
	}
	for i := 0; i < 12; i++ {
		c := s[i]
		switch i {
		case 4, 7:
			if c != ':' {
				return false
			}
		case 10:
			if c != '.' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

// bdfAfter finds a dddd:bb:dd.f address right after marker.
func bdfAfter(s, marker string) (string, bool) {
	rest, ok := after(s, marker)
	if !ok || !isBDF(rest) {
		return "", false
	}
	return strings.ToLower(rest[:12]), true
}

// commPid splits "name[1234]" ending at s[:end] into name and pid. The name
// may contain spaces (task comm is free text), so it runs back to the start.
func commPid(s string) (comm string, pid int64, ok bool) {
	lb := strings.LastIndexByte(s, '[')
	if lb < 0 || !strings.HasSuffix(s, "]") {
		return "", 0, false
	}
	pid, rest, ok := leadingInt(s[lb+1:])
	if !ok || rest != "]" {
		return "", 0, false
	}
	comm = strings.TrimSpace(s[:lb])
	if i := strings.LastIndex(comm, ": "); i >= 0 {
		comm = comm[i+2:]
	}
	return strings.Trim(comm, "`"), pid, true
}

// appendDistinct adds v to the []string under key, keeping at most max
// distinct values, so a storm of faults stays a bounded summary.
func appendDistinct(d map[string]any, key, v string, max int) {
	if v == "" {
		return
	}
	list, _ := d[key].([]string)
	if len(list) >= max {
		return
	}
	for _, x := range list {
		if x == v {
			return
		}
	}
	d[key] = append(list, v)
}
