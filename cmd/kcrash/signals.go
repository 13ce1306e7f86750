package main

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is "SIGSEGV", or "signal 40" for one without a name.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// signalByName accepts "USR2", "SIGUSR2" or "12".
func signalByName(name string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	s := unix.SignalNum(n)
	return s, s != 0
}
