package collectors

import (
	"fmt"
	"io"
	"os"
)

// TailFile reads the last n bytes of a regular file, and says how large the
// whole file is.
func TailFile(path string, n int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, st.Size(), fmt.Errorf("not a regular file")
	}
	if st.Size() > n {
		if _, err := f.Seek(st.Size()-n, io.SeekStart); err != nil {
			return nil, st.Size(), err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, n))
	return b, st.Size(), err
}
