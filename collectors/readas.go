package collectors

import (
	"fmt"
	"io"
	"os"

	"github.com/kcrash/kcrash/internal/readas"
)

// Identity is whose rights a read on behalf of a job uses: the job's user
// (internal/readas, the one mechanism every reader of a job's files uses).
type Identity = readas.Identity

// RefusedError is a file kcrash would not read on a job's behalf, and why.
type RefusedError = readas.RefusedError

// LookupIdentity is readas.LookupIdentity.
func LookupIdentity(uid, gid int) *Identity { return readas.LookupIdentity(uid, gid) }

// OpenAs is readas.OpenAs: path opened with id's rights, not following a
// final symlink, without blocking, a regular file only.
func OpenAs(id *Identity, path string) (*os.File, error) { return readas.OpenAs(id, path) }

// TailFileAs is TailFile with OpenAs's rules: the last n bytes of a
// regular file id may read, and the whole file's size.
func TailFileAs(id *Identity, path string, n int64) ([]byte, int64, error) {
	f, err := OpenAs(id, path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return tailOf(f, n)
}

func tailOf(f *os.File, n int64) ([]byte, int64, error) {
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
