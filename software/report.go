package software

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kcrash/kcrash/internal/readas"
)

// SchemaVersion is software.json's.
const SchemaVersion = 1

// Report is software.json.
type Report struct {
	SchemaVersion int       `json:"schema_version"`
	Processes     []Process `json:"processes"`
	// Libraries are the files mapped executable by any process of the tree,
	// each once (by device and inode), with the pids that mapped it.
	Libraries    []Library `json:"libraries"`
	LibrariesCut bool      `json:"libraries_cut,omitempty"`
	Python       []Python  `json:"python"`
	Runtime      Runtime   `json:"runtime"`
	Issues       []Issue   `json:"issues"`
	// Notes say what could not be read, so a short report is not mistaken for a small stack.
	Notes []string `json:"notes,omitempty"`
}

// Process is one process of the tree as the sampler saw it.
type Process struct {
	Pid           int        `json:"pid"`
	Name          string     `json:"name"`
	Exe           string     `json:"exe,omitempty"`
	Start         *time.Time `json:"start,omitempty"`
	Python        bool       `json:"python,omitempty"`
	PythonVersion string     `json:"python_version,omitempty"`
	Libraries     int        `json:"libraries"` // how many of Libraries it mapped
	Reads         int        `json:"maps_reads"`
	LastRead      *time.Time `json:"last_read,omitempty"`
	Exited        bool       `json:"exited,omitempty"` // gone (or exec'd) by collection

	libIdx  []int
	argv0   string
	cwd     string
	environ map[string]string
	as      *readas.Identity
}

// Library is one mapped file.
type Library struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size,omitempty"`
	MTime   time.Time `json:"mtime,omitzero"`
	BuildID string    `json:"build_id,omitempty"`
	// Deleted: the kernel marked the mapping "(deleted)": the file was
	// unlinked after it was mapped (a rebuild or reinstall replaced it).
	Deleted bool `json:"deleted,omitempty"`
	// Replaced: the path now holds another file than the one mapped.
	Replaced bool `json:"replaced,omitempty"`
	// ModifiedAfterStart: the mapped file itself was written (copied over
	// in place) after kcrash first saw it mapped.
	ModifiedAfterStart bool   `json:"modified_after_start,omitempty"`
	Package            string `json:"package,omitempty"` // the distribution it belongs to, when known
	Pids               []int  `json:"pids"`
	PidCount           int    `json:"pid_count,omitempty"` // when Pids was cut

	pids       []int
	dev        string
	inode      uint64
	as         *readas.Identity // the rights of the process that first mapped it
	start, end uint64           // a mapping to read through map_files (describeMapped)
}

// Build assembles the report from what the sampler saw, reading the Python
// metadata and the host's versions now.
func Build(ctx context.Context, r Roots, s *Sampler, lim Limits) *Report {
	rep := &Report{SchemaVersion: SchemaVersion, Processes: []Process{}, Libraries: []Library{}, Python: []Python{}, Issues: []Issue{}}
	if s != nil {
		rep.Processes, rep.Libraries, rep.LibrariesCut = s.Snapshot()
	}
	rep.Runtime = ReadRuntime(r)
	mappedRuntimes(&rep.Runtime, rep.Libraries)
	rep.Python = pythons(ctx, r, rep, lim)
	attributeLibraries(rep)
	rep.Issues = Check(rep)
	if ctx.Err() != nil {
		rep.Notes = append(rep.Notes, "stopped at the collector's deadline: the package list or a checkout scan may be incomplete")
	}
	return rep
}

// pythons groups the Python processes by interpreter, virtual environment
// and user, and reads the packages on each one's path with that user's
// rights: its PYTHONPATH, links and checkouts are the user's to choose.
func pythons(ctx context.Context, r Roots, rep *Report, lim Limits) []Python {
	type group struct {
		py    Python
		paths []string
		env   map[string]string
		as    *readas.Identity
	}
	groups := map[string]*group{}
	var order []string
	// The processes of a tree mostly share what venvOf looks at: one look
	// (one switch of rights) each.
	venvs := map[string]string{}
	for _, p := range rep.Processes {
		if !p.Python || p.Exe == "" {
			continue
		}
		vk := strings.Join([]string{p.argv0, p.cwd, p.environ["PATH"], p.environ["VIRTUAL_ENV"], identityKey(p.as)}, "\x00")
		venv, ok := venvs[vk]
		if !ok {
			if err := readas.Do(p.as, func() error { venv = venvOf(r, p); return nil }); err != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("pid %d: its virtual environment was not looked for: %v", p.Pid, err))
			}
			venvs[vk] = venv
		}
		key := p.Exe + "\x00" + venv + "\x00" + identityKey(p.as)
		g := groups[key]
		if g == nil {
			g = &group{py: Python{Executable: p.Exe, Version: p.PythonVersion, Venv: venv, Prefix: prefixOf(p.Exe)}, env: p.environ, as: p.as}
			groups[key] = g
			order = append(order, key)
		}
		if g.py.Version == "" {
			g.py.Version = p.PythonVersion
		}
		g.py.Pids = append(g.py.Pids, p.Pid)
		for _, i := range p.libIdx {
			g.paths = append(g.paths, rep.Libraries[i].Path)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return len(groups[order[i]].py.Pids) > len(groups[order[j]].py.Pids) })
	out := []Python{}
	for _, k := range order {
		g := groups[k]
		// Mapped extensions first: they are where the interpreter really
		// imported from; then what site.py would add.
		sites := append(SiteDirsFrom(g.paths), CandidateSiteDirs(g.py.Prefix, g.py.Venv, g.py.Version, g.env)...)
		rr := r
		rr.log = &readLog{}
		err := readas.Do(g.as, func() error {
			g.py.Packages, g.py.SiteDirs, g.py.PackagesCut = ReadPackages(ctx, rr, sites, lim)
			return nil
		})
		whose := g.py.Executable
		if g.as != nil && readas.Switches(g.as) {
			whose += " of " + g.as.String()
		}
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the packages were not read: %v", whose, err))
		}
		if n := rr.log.note(whose); n != "" {
			rep.Notes = append(rep.Notes, n)
		}
		if g.py.Packages == nil {
			g.py.Packages = []Package{}
		}
		if g.py.SiteDirs == nil {
			g.py.SiteDirs = []string{}
		}
		g.py.Pids = uniqInts(g.py.Pids)
		out = append(out, g.py)
	}
	return out
}

// prefixOf is sys.base_prefix as the executable's location implies it.
func prefixOf(exe string) string {
	d := filepath.Dir(exe)
	if filepath.Base(d) == "bin" {
		return filepath.Dir(d)
	}
	return d
}

// venvOf finds the virtual environment a Python process runs in: its argv[0]
// (the venv's bin/python is a link to the base interpreter, so exe alone
// does not say) or VIRTUAL_ENV, confirmed by pyvenv.cfg.
func venvOf(r Roots, p Process) string {
	var cands []string
	if a := p.argv0; a != "" {
		if !filepath.IsAbs(a) && strings.Contains(a, "/") && p.cwd != "" {
			a = filepath.Join(p.cwd, a)
		}
		if !strings.Contains(a, "/") {
			for _, d := range strings.Split(p.environ["PATH"], ":") {
				if d != "" {
					if _, err := os.Stat(r.Path(filepath.Join(d, a))); err == nil {
						a = filepath.Join(d, a)
						break
					}
				}
			}
		}
		if filepath.IsAbs(a) {
			cands = append(cands, filepath.Dir(filepath.Dir(a)))
		}
	}
	if v := p.environ["VIRTUAL_ENV"]; v != "" {
		cands = append(cands, v)
	}
	for _, c := range cands {
		if _, err := os.Stat(r.Path(filepath.Join(c, "pyvenv.cfg"))); err == nil {
			return c
		}
	}
	return ""
}

// attributeLibraries names the distribution each mapped file belongs to:
// the top-level directory under a site directory, or an editable checkout.
func attributeLibraries(rep *Report) {
	type owner struct{ dir, name string }
	var owners []owner
	for _, py := range rep.Python {
		for _, pk := range py.Packages {
			if pk.Editable != nil {
				owners = append(owners, owner{filepath.Clean(pk.Editable.Source) + "/", pk.Name})
			}
		}
	}
	sort.Slice(owners, func(i, j int) bool { return len(owners[i].dir) > len(owners[j].dir) })
	known := map[string]string{}
	for _, py := range rep.Python {
		for _, pk := range py.Packages {
			known[strings.ReplaceAll(Normalize(pk.Name), "-", "_")] = pk.Name
		}
	}
	for i := range rep.Libraries {
		l := &rep.Libraries[i]
		for _, o := range owners {
			if strings.HasPrefix(l.Path, o.dir) {
				l.Package = o.name
				break
			}
		}
		if l.Package != "" {
			continue
		}
		for _, k := range []string{"/site-packages/", "/dist-packages/"} {
			if _, rest, ok := strings.Cut(l.Path, k); ok {
				top, _, _ := strings.Cut(rest, "/")
				top = strings.TrimSuffix(strings.TrimSuffix(top, ".libs"), ".so")
				if n, ok := known[strings.ReplaceAll(Normalize(top), "-", "_")]; ok {
					l.Package = n
				} else if strings.Contains(rest, "/") {
					l.Package = top
				}
			}
		}
	}
}
