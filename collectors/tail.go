package collectors

import "os"

// TailFile reads the last n bytes of a regular file, and says how large the
// whole file is. It opens with kcrash's own rights and follows symlinks: for
// files kcrash itself chose. A file a job chose is read with TailFileAs.
func TailFile(path string, n int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return tailOf(f, n)
}
