package capture

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// lineWriter is where kcrash's own lines go (never the child's output): on
// a terminal that kcrash made raw (OPOST off), a bare "\n" would leave the
// cursor in its column, so each line ends in "\r\n" there; and a line
// kcrash writes after the child left the cursor mid-line (a progress bar)
// starts on a line of its own.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
	fd int // the terminal's descriptor, -1 when w is none
	// output reports the last byte of the child's output and how many
	// bytes it wrote; nil when there is no output to follow.
	output func() (byte, int64)
	// seen is the output's count when kcrash last ended a line of its own:
	// the cursor is at a line's start while the child wrote nothing since.
	seen int64
}

func newLineWriter(w io.Writer, output func() (byte, int64)) *lineWriter {
	lw := &lineWriter{w: w, fd: -1, output: output}
	if f, ok := w.(*os.File); ok {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			lw.fd = int(f.Fd())
		}
	}
	return lw
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	raw := false
	if lw.fd >= 0 {
		if t, err := unix.IoctlGetTermios(lw.fd, unix.TCGETS); err == nil {
			raw = t.Oflag&unix.OPOST == 0
		}
	}
	nl := []byte("\n")
	if raw {
		nl = []byte("\r\n")
	}
	var out []byte
	if lw.output != nil {
		last, total := lw.output()
		if total > lw.seen && last != '\n' {
			out = append(out, nl...)
		}
	}
	if raw {
		// "\r\n" already there stays as it is.
		out = append(out, bytes.ReplaceAll(bytes.ReplaceAll(p, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))...)
	} else {
		out = append(out, p...)
	}
	if _, err := lw.w.Write(out); err != nil {
		return 0, err
	}
	if lw.output != nil && len(p) > 0 && p[len(p)-1] == '\n' {
		_, lw.seen = lw.output()
	}
	return len(p), nil
}
