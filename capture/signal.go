package capture

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalName is "SIGSEGV", or "signal 40" for one without a name.
func SignalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
