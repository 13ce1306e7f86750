package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/scratch"
)

// Stage is a bundle being assembled: a private directory that collectors fill.
type Stage struct {
	Dir  string // files go here, by their names inside the bundle
	Name string
}

// stagePrefix names staging directories; a claimed one (being recovered)
// carries "~" and its recoverer's tag after the random part.
const stagePrefix = ".kcrash-stage-"

// Files of the stage's own, never part of the bundle: the writer's record,
// written before anything else, and the journal of the collectors that
// finished.
const (
	writerFile  = ".kcrash-writer.json"
	journalFile = ".kcrash-done.jsonl"
)

// Writer is what a stage records of the kcrash writing it, first thing: who
// it is (to tell later whether it still lives) and what the bundle is of
// (to make the bundle from what it left if it does not).
type Writer struct {
	scratch.Owner
	Name          string    `json:"name"` // the bundle's
	Mode          string    `json:"mode"`
	Command       []string  `json:"command"`
	Cwd           string    `json:"cwd,omitempty"`
	KcrashVersion string    `json:"kcrash_version,omitempty"`
	StartTime     time.Time `json:"start_time"` // of the run
	StagedAt      time.Time `json:"staged_at"`
	EndTime       time.Time `json:"end_time"` // of the child, or when the snapshot was asked for
	Exit          Exit      `json:"exit"`
	Hang          bool      `json:"hang,omitempty"`
	Job           *Job      `json:"job,omitempty"`
	Collectors    []string  `json:"collectors"` // chosen, in the order they were to run
	HostInfo      Host      `json:"host_info"`
	Env           *Env      `json:"env,omitempty"` // as the manifest has it: redacted
	Notes         []string  `json:"notes,omitempty"`
	// Secrets lets a recovery redact what the writer's environment held
	// secret without the secrets being kept here.
	Secrets *redact.Prints `json:"secrets,omitempty"`
}

// stageMinFree is the free space a directory needs to be worth staging in:
// below it the collectors' files would be cut short by a full disk.
const stageMinFree = 32 << 20

// NewStage makes a stage for a bundle named name (see NewStageFor).
func NewStage(dir, name string) (*Stage, error) { return NewStageFor(dir, Writer{Name: name}) }

// NewStageFor makes a private (0700) staging directory inside dir, the
// directory the bundle will be written to (so the final link stays on one
// filesystem and a full $TMPDIR does not matter); when dir cannot take it
// (unwritable, full) it goes to PrivateDir instead. w, with this process
// as its owner, is written into it before anything else: a kcrash killed
// while it collects leaves a stage that Recover turns into a bundle.
func NewStageFor(dir string, w Writer) (*Stage, error) {
	w.Owner = scratch.Self()
	if w.StagedAt.IsZero() {
		w.StagedAt = time.Now().UTC()
	}
	s, err := mkStage(dir, w.Name)
	if err != nil {
		return nil, err
	}
	if err := writeWriter(s.Dir, &w); err != nil {
		s.Remove()
		return nil, fmt.Errorf("staging directory: %v", err)
	}
	return s, nil
}

func mkStage(dir, name string) (*Stage, error) {
	var first error
	low := false
	if dir != "" {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			first = err
		} else if free, ok := freeBytes(dir); ok && free < stageMinFree {
			first, low = fmt.Errorf("%s: only %d bytes free", dir, free), true
		} else if d, err := os.MkdirTemp(dir, stagePrefix); err != nil {
			first = err
		} else {
			return &Stage{Dir: d, Name: name}, nil
		}
	}
	fb, err := PrivateDir()
	if err == nil {
		var d string
		if d, err = os.MkdirTemp(fb, stagePrefix); err == nil {
			return &Stage{Dir: d, Name: name}, nil
		}
	}
	if low {
		// nowhere better: a small bundle may still fit where space is low
		if d, lerr := os.MkdirTemp(dir, stagePrefix); lerr == nil {
			return &Stage{Dir: d, Name: name}, nil
		}
	}
	if first != nil {
		return nil, fmt.Errorf("%v; fallback: %v", first, err)
	}
	return nil, err
}

// writeWriter puts the writer's record in place whole or not at all.
func writeWriter(dir string, w *Writer) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, writerFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, writerFile))
}

// readWriter reads a stage's writer record.
func readWriter(dir string) (*Writer, error) {
	b, err := os.ReadFile(filepath.Join(dir, writerFile))
	if err != nil {
		return nil, err
	}
	var w Writer
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%s: %v", writerFile, err)
	}
	return &w, nil
}

// Done records in the stage that a collector finished, with its status: a
// recovery tells what was collected whole from what was cut short.
func (s *Stage) Done(st CollectorStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, journalFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ownFile says whether a staged file is the stage's own, not the bundle's.
func ownFile(rel string) bool {
	return rel == writerFile || rel == writerFile+".tmp" || rel == journalFile
}

func freeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// PrivateDir is where a bundle goes when --out cannot take it:
// $TMPDIR/kcrash-<uid>, a 0700 directory owned by this user. A bundle may hold
// what redaction missed, so it is never left world-readable; a path someone
// else made (or a symlink) is not used.
func PrivateDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("kcrash-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("%s: not a directory of this user's; not writing a bundle there", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Remove deletes the staging directory.
func (s *Stage) Remove() error { return os.RemoveAll(s.Dir) }

// isStageName says whether a directory entry's name is a stage's.
func isStageName(n string) bool { return strings.HasPrefix(n, stagePrefix) }
