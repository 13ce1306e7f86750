// Package iostreams holds a command's standard streams, so that what kcrash
// prints can be captured by a test (cli/cli's IOStreams, cut to what kcrash
// uses).
package iostreams

import (
	"bytes"
	"io"
	"os"
)

// IOStreams are the streams a command reads and prints to. In stays an
// *os.File: the supervisor puts a terminal into raw mode through it.
type IOStreams struct {
	In  *os.File
	Out io.Writer
	Err io.Writer
}

// System is the process's own streams.
func System() *IOStreams { return &IOStreams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// Test is streams whose output lands in buffers; In is /dev/null.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	in, _ := os.Open(os.DevNull)
	return &IOStreams{In: in, Out: out, Err: errOut}, out, errOut
}
