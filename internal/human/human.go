// Package human formats durations and sizes the way kcrash prints them to
// people: on its end line and in summary.md alike.
package human

import (
	"fmt"
	"time"
)

// Duration is "3m12s", "4.2s", "850ms": a sub-second run stays readable.
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Bytes is "1.2 MB", "850 B": decimal units, the one size format of kcrash's
// messages, summaries and upload comments.
func Bytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// OrDash is s, or "-" where there is nothing to print.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Size writes n as the size flags take it back (1GiB, 8MiB, 1000B): a
// flag's default in --help, a limit named in an error.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
