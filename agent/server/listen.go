package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Listen opens the agent's unix socket at path. The directory is created
// 0755; the socket is 0666 because access is decided per connection from
// the peer's credentials, not by who can open the file. A socket left at
// path by an agent that died is replaced; one a live agent answers on is
// an error, so that two agents never split the clients between them.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("agent socket: %s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("another agent is listening on %s", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("agent socket: removing the stale %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return ln, nil
}

// listenFDsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// SystemdListener returns the socket systemd passed to this process
// (socket activation: LISTEN_PID is this process, LISTEN_FDS at least 1,
// the socket on descriptor 3). The variables are removed so that a child
// does not take the socket for its own.
func SystemdListener() (net.Listener, bool) {
	pid, err := strconv.Atoi(os.Getenv("LISTEN_PID"))
	if err != nil || pid != os.Getpid() {
		return nil, false
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n < 1 {
		return nil, false
	}
	name := "systemd"
	if names := os.Getenv("LISTEN_FDNAMES"); names != "" {
		name, _, _ = strings.Cut(names, ":")
	}
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(v)
	}
	syscall.CloseOnExec(listenFDsStart)
	f := os.NewFile(listenFDsStart, name)
	ln, err := net.FileListener(f)
	f.Close() // FileListener holds its own descriptor
	if err != nil {
		return nil, false
	}
	return ln, true
}
