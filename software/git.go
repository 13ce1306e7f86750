package software

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Git is a source checkout's state, read from .git's files (git is never run).
type Git struct {
	Dir      string `json:"dir"`              // the work tree
	Commit   string `json:"commit,omitempty"` // HEAD
	Branch   string `json:"branch,omitempty"` // "" when HEAD is detached
	Upstream string `json:"upstream,omitempty"`
	// UpstreamCommit is the remote-tracking branch's commit as last fetched.
	UpstreamCommit string `json:"upstream_commit,omitempty"`
	// Ahead counts HEAD's first-parent commits not in the upstream, when
	// they are loose objects (new local commits are); nil when not known.
	Ahead *int `json:"ahead,omitempty"`
}

// FindGit looks for the checkout holding dir (dir or up to 4 parents).
func FindGit(dir string) *Git { return Roots{}.findGit(dir) }

func (r Roots) findGit(dir string) *Git {
	d := filepath.Clean(dir)
	for i := 0; i < 5; i++ {
		if g := r.readGit(d); g != nil {
			return g
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return nil
}

func (r Roots) readGit(work string) *Git {
	gitdir := filepath.Join(work, ".git")
	st, err := os.Stat(gitdir)
	if err != nil || !st.IsDir() && !st.Mode().IsRegular() {
		return nil
	}
	if !st.IsDir() { // worktree or submodule: "gitdir: PATH"
		b := r.readTrim(gitdir)
		p, ok := strings.CutPrefix(b, "gitdir:")
		if !ok {
			return nil
		}
		p = strings.TrimSpace(p)
		if !filepath.IsAbs(p) {
			p = filepath.Join(work, p)
		}
		gitdir = p
	}
	common := gitdir
	if c := r.readTrim(filepath.Join(gitdir, "commondir")); c != "" {
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		common = filepath.Clean(c)
	}
	g := &Git{Dir: work}
	ref, commit := parseHead(r.readTrim(filepath.Join(gitdir, "HEAD")))
	if ref != "" {
		g.Branch = strings.TrimPrefix(ref, "refs/heads/")
		g.Commit = r.resolveRef(gitdir, common, ref)
	} else {
		g.Commit = commit
	}
	if g.Branch != "" {
		if remote, merge := r.branchUpstream(filepath.Join(common, "config"), g.Branch); remote != "" && merge != "" {
			up := "refs/remotes/" + remote + "/" + strings.TrimPrefix(merge, "refs/heads/")
			if validRef(up) {
				g.Upstream = remote + "/" + strings.TrimPrefix(merge, "refs/heads/")
				g.UpstreamCommit = r.resolveRef(gitdir, common, up)
			}
		}
	}
	if g.Commit != "" && g.UpstreamCommit != "" {
		g.Ahead = r.aheadLoose(common, g.Commit, g.UpstreamCommit, 200)
	}
	return g
}

func isHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// parseHead reads HEAD's text: the ref it names, when git would follow it
// (validRef), or a detached HEAD's commit.
func parseHead(head string) (ref, commit string) {
	if r, ok := strings.CutPrefix(head, "ref:"); ok {
		if r = strings.TrimSpace(r); validRef(r) {
			return r, ""
		}
		return "", "" // not a ref git would follow: no commit, whatever the file names
	}
	if isHash(head) {
		return "", head
	}
	return "", ""
}

// validRef says whether a name is a ref git would resolve under refs/
// (git check-ref-format's rules): so a ref joined to the git directory
// stays inside it.
func validRef(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "@{") || len(ref) > 1024 {
		return false
	}
	for _, c := range ref {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return false
		}
	}
	for _, comp := range strings.Split(ref, "/") {
		if comp == "" || strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// resolveRef reads a ref (validRef's) from the git directory, loose or packed.
func (r Roots) resolveRef(gitdir, common, ref string) string {
	if !validRef(ref) {
		return ""
	}
	for _, d := range []string{gitdir, common} {
		if v := r.readTrim(filepath.Join(d, filepath.FromSlash(ref))); isHash(v) {
			return v
		}
	}
	f, err := r.openFile(filepath.Join(common, "packed-refs"))
	if err != nil {
		return ""
	}
	defer f.Close()
	return packedRef(io.LimitReader(f, maxPackedRefs), ref)
}

// packedRef finds ref's commit in a packed-refs file.
func packedRef(r io.Reader, ref string) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		h, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && isHash(h) {
			return h
		}
	}
	return ""
}

// branchUpstream reads [branch "NAME"] remote and merge from a git config.
func (r Roots) branchUpstream(config, branch string) (remote, merge string) {
	b, err := r.readSmall(config, maxConfig)
	if err != nil {
		return "", ""
	}
	return parseBranchUpstream(b, branch)
}

// parseBranchUpstream reads [branch "NAME"] remote and merge from a git
// config's text.
func parseBranchUpstream(b []byte, branch string) (remote, merge string) {
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			in = l == `[branch "`+branch+`"]`
			continue
		}
		if !in {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "remote":
			remote = strings.TrimSpace(v)
		case "merge":
			merge = strings.TrimSpace(v)
		}
	}
	return remote, merge
}

// aheadLoose walks first parents from head until upstream, reading loose
// commit objects only; a packed commit on the way makes the count unknown.
func (r Roots) aheadLoose(common, head, upstream string, max int) *int {
	n := 0
	for c := head; c != upstream; n++ {
		if n >= max {
			return nil
		}
		p, ok := r.looseParent(common, c)
		if !ok || !isHash(p) {
			return nil
		}
		c = p
	}
	return &n
}

func (r Roots) looseParent(common, hash string) (string, bool) {
	if !isHash(hash) {
		return "", false
	}
	f, err := r.openFile(filepath.Join(common, "objects", hash[:2], hash[2:]))
	if err != nil {
		return "", false
	}
	defer f.Close()
	// A loose commit is a few hundred bytes: a bounded input bounds the
	// time a crafted stream (empty blocks, no output) can take.
	z, err := zlib.NewReader(io.LimitReader(f, 1<<20))
	if err != nil {
		return "", false
	}
	defer z.Close()
	b, _ := io.ReadAll(io.LimitReader(z, 64<<10))
	return parseCommitParent(b)
}

// parseCommitParent reads a loose commit object's (inflated) first parent:
// "" and true for a root commit, false for what is not a commit.
func parseCommitParent(b []byte) (string, bool) {
	hdr, body, ok := bytes.Cut(b, []byte{0})
	if !ok || !bytes.HasPrefix(hdr, []byte("commit ")) {
		return "", false
	}
	for _, l := range bytes.Split(body, []byte("\n")) {
		if len(l) == 0 {
			break
		}
		if p, ok := bytes.CutPrefix(l, []byte("parent ")); ok {
			return string(p), true
		}
	}
	return "", true
}
