package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// fileUploader copies the bundle to a path: a shared filesystem, a mounted
// bucket, a directory that a sync job empties.
type fileUploader struct{}

// dest is the file to write: the target itself, or the bundle's name inside
// it when it is a directory (or ends in a slash).
func (fileUploader) dest(j *Job) string {
	d := j.Target.Path
	if strings.HasSuffix(d, string(filepath.Separator)) {
		return filepath.Join(d, j.Payload.Name)
	}
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return filepath.Join(d, j.Payload.Name)
	}
	return d
}

func (u fileUploader) Plan(j *Job) ([]Step, error) {
	return []Step{{Why: "copy the bundle (never over another file)", Method: "COPY", URL: "file://" + filepath.ToSlash(u.dest(j)),
		Body: fileBodyDesc(j, "", "", j.Payload.Size)}}, nil
}

func (u fileUploader) Upload(ctx context.Context, j *Job) error {
	dest := u.dest(j)
	made := &Created{Name: filepath.Base(dest), URL: "file://" + filepath.ToSlash(dest)}
	if _, err := os.Lstat(dest); err == nil {
		// The same bundle there already is a rerun, not a conflict.
		if sum, err := fileSHA256(dest); err == nil && sum == j.Payload.SHA256 {
			made.Reused = true
			j.Result.Attachment = made
			return nil
		}
		return fmt.Errorf("%s exists and is another file; not overwriting it", dest)
	}
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	in, err := openSame(j.Payload)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".kcrash-upload-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, &ctxReader{ctx: ctx, r: io.LimitReader(in, j.Payload.Size)})
	if err == nil {
		if fi, serr := in.Stat(); serr == nil {
			err = tmp.Chmod(fi.Mode().Perm())
		}
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// A hard link fails rather than replace: two uploads racing for one
	// name cannot overwrite each other.
	if err := os.Link(tmp.Name(), dest); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists and is another file; not overwriting it", dest)
		}
		if _, serr := os.Lstat(dest); serr == nil {
			return fmt.Errorf("%s exists and is another file; not overwriting it", dest)
		}
		if err := os.Rename(tmp.Name(), dest); err != nil {
			return err
		}
	}
	j.Result.Attachment = made
	return nil
}

// ctxReader stops a long copy when the user interrupts.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
