package bundle

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/scratch"
)

// RecoverOptions say how Recover writes the bundles it makes.
type RecoverOptions struct {
	// Environ and Secrets are redacted as in any bundle (this process's
	// environment, nil for os.Environ(); the config file's credentials),
	// besides what the stage's writer recorded of its own.
	Environ []string
	Secrets []string
	Budget  int64
	Report  func(dir, name string, m *Manifest) ([]byte, error)
	// Triage, when set, judges what a stage holds: the manifest's triage
	// and summary.md. Without it summary.md only says what the bundle is.
	Triage func(dir string, w *Writer) (triage json.RawMessage, summary string)
	// Warn receives one line for each stage left as it was for an error.
	Warn io.Writer
}

// Recovered is a bundle Recover made.
type Recovered struct {
	Path   string
	Size   int64
	Writer Writer // of the stage it was made from
}

// claimSep separates a claimed stage's name from its recoverer's tag.
const claimSep = "~"

// Recover turns every stage in dir whose writer is gone (a kcrash killed
// while it collected: SIGKILL after a scheduler's grace, the OOM killer)
// into a bundle in dir, marked incomplete, then removes the stage. A stage
// of a live writer, or of one that cannot be told from here (another pid
// namespace or host), of another user, or being recovered by a live
// kcrash, is left alone; one that cannot be made into a bundle is left with
// a line on Warn. Concurrent recoveries (the ranks of a job starting on one
// node) each claim a stage by renaming it: one bundle per stage.
func Recover(dir string, o RecoverOptions) ([]Recovered, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Recovered
	for _, e := range ents {
		if !e.IsDir() || !isStageName(e.Name()) {
			continue
		}
		rec, ok, err := recoverStage(dir, e.Name(), o)
		if err != nil && o.Warn != nil {
			fmt.Fprintf(o.Warn, "kcrash: %s: a killed kcrash's stage left as it is: %v\n", filepath.Join(dir, e.Name()), err)
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

// recoverStage makes a bundle of one stage when its writer is gone;
// ok=false with a nil error when it is not one to recover.
func recoverStage(dir, name string, o RecoverOptions) (Recovered, bool, error) {
	path := filepath.Join(dir, name)
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || int(st.Uid) != os.Geteuid() {
		return Recovered{}, false, nil
	}
	base, tag, claimed := strings.Cut(name, claimSep)
	if claimed {
		// Another kcrash took it; it is free again only once that one is gone.
		if owner, ok := scratch.ParseTag(tag); !ok || !owner.Gone() {
			return Recovered{}, false, nil
		}
	} else {
		w, err := readWriter(path)
		if errors.Is(err, fs.ErrNotExist) {
			// Between mkdir and the writer's record, or an older kcrash's.
			return Recovered{}, false, nil
		}
		if err != nil {
			return Recovered{}, false, err
		}
		if !w.Owner.Gone() {
			return Recovered{}, false, nil
		}
	}
	mine := filepath.Join(dir, base+claimSep+scratch.Self().Tag())
	if err := os.Rename(path, mine); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Recovered{}, false, nil // another kcrash claimed it first
		}
		return Recovered{}, false, err
	}
	w, err := readWriter(mine)
	if err != nil {
		return Recovered{}, false, err
	}
	res, err := writeRecovered(&Stage{Dir: mine, Name: w.Name}, dir, w, o)
	if err != nil {
		return Recovered{}, false, err
	}
	os.RemoveAll(mine)
	return Recovered{Path: res.Path, Size: res.Size, Writer: *w}, true, nil
}

// writeRecovered writes the bundle of a dead writer's stage: the manifest
// from its record, incomplete, with notes on what was collected and what not.
func writeRecovered(s *Stage, out string, w *Writer, o RecoverOptions) (Result, error) {
	if w.Name == "" {
		return Result{}, fmt.Errorf("%s names no bundle", writerFile)
	}
	done := readJournal(s.Dir)
	var statuses []CollectorStatus
	var finished, unfinished []string
	for _, n := range w.Collectors {
		if st, ok := done[n]; ok {
			statuses = append(statuses, st)
			finished = append(finished, n)
			continue
		}
		unfinished = append(unfinished, n)
		statuses = append(statuses, CollectorStatus{Name: n, Status: StatusError, Files: []string{},
			Error: "not finished: kcrash was killed while it collected"})
	}
	files, err := s.files()
	if err != nil {
		return Result{}, err
	}
	var present []string
	for _, f := range files {
		if f.name != "summary.md" && f.name != "report.html" {
			present = append(present, f.name)
		}
	}
	host := w.HostInfo
	if host.Hostname == "" {
		host.Hostname = w.Owner.Host
	}
	if host.GPUs == nil {
		host.GPUs = []string{}
	}
	env := Env{Profiles: []string{}, Set: map[string]string{}, Kept: map[string]string{}, User: map[string]string{}}
	if w.Env != nil {
		env = *w.Env
	}
	m := &Manifest{
		SchemaVersion: SchemaVersion, KcrashVersion: w.KcrashVersion, Mode: w.Mode, Command: w.Command,
		Cwd: w.Cwd, StartTime: w.StartTime, EndTime: w.EndTime, Exit: w.Exit, Host: host, Job: w.Job,
		Env: env, Triage: json.RawMessage("null"), Collectors: statuses, Truncated: []string{}, Incomplete: true,
		Notes: []string{
			fmt.Sprintf("incomplete: the kcrash that collected this bundle (pid %d on %s) was killed while it collected (it began at %s); made at %s from what it had staged",
				w.Owner.Pid, host.Hostname, w.StagedAt.UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339)),
			"collectors that finished: " + listOr(finished, "none"),
			"not collected (unfinished when kcrash was killed): " + listOr(unfinished, "none"),
			"files staged: " + listOr(present, "none"),
		},
	}
	m.Notes = append(m.Notes, w.Notes...)
	summary := ""
	if o.Triage != nil {
		var tri json.RawMessage
		tri, summary = o.Triage(s.Dir, w)
		if len(tri) > 0 {
			m.Triage = tri
		}
	}
	summary = incompleteSummary(summary, w, finished, unfinished)
	if err := os.WriteFile(filepath.Join(s.Dir, "summary.md"), []byte(summary), 0o644); err != nil {
		return Result{}, err
	}
	environ := o.Environ
	if environ == nil {
		environ = os.Environ()
	}
	r := redact.New(environ)
	r.Add(o.Secrets...)
	if w.Secrets != nil {
		r.AddPrints(*w.Secrets)
	}
	return s.Write(m, WriteOptions{Out: out, Budget: o.Budget, Redactor: r, Report: o.Report})
}

// incompleteSummary puts what the reader must know first, under the title.
func incompleteSummary(summary string, w *Writer, finished, unfinished []string) string {
	line := fmt.Sprintf("**Incomplete bundle**: kcrash (pid %d) was killed while it collected; not collected: %s (collectors that finished: %s).\n",
		w.Owner.Pid, listOr(unfinished, "none"), listOr(finished, "none"))
	if summary == "" {
		return fmt.Sprintf("# kcrash: %s\n\n%s", strings.Join(w.Command, " "), line)
	}
	if title, rest, ok := strings.Cut(summary, "\n"); ok && strings.HasPrefix(title, "#") {
		return title + "\n\n" + line + rest
	}
	return line + "\n" + summary
}

func listOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

// readJournal is the status of each collector that finished, by name.
func readJournal(dir string) map[string]CollectorStatus {
	out := map[string]CollectorStatus{}
	f, err := os.Open(filepath.Join(dir, journalFile))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var st CollectorStatus
		if json.Unmarshal(sc.Bytes(), &st) == nil && st.Name != "" {
			if st.Files == nil {
				st.Files = []string{}
			}
			out[st.Name] = st
		}
	}
	return out
}
