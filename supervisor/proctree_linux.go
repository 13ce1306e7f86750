package supervisor

import "golang.org/x/sys/unix"

func getsid(pid int32) (int32, error) {
	s, err := unix.Getsid(int(pid))
	return int32(s), err
}

func getpgid(pid int32) (int32, error) {
	g, err := unix.Getpgid(int(pid))
	return int32(g), err
}
