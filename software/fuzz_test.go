package software

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fuzz targets feed the readers what a job's user can write: maps
// lines (paths are the user's), METADATA headers, .pth lines and editable
// finders, direct_url.json, git's HEAD, config and packed-refs.

func FuzzParseMaps(f *testing.F) {
	f.Add([]byte("7f0000000000-7f0000001000 r-xp 00000000 fd:01 1234   /usr/lib/libc.so.6\n"))
	f.Add([]byte("7f0000000000-7f0000001000 r-xp 00001000 00:00 0 \n55d0-55d1 rw-p 0 00:00 0 [heap]\n"))
	f.Add([]byte("1-2 r-xp 0 fd:01 9 /tmp/a b/lib.so (deleted)\n1-2 r-xp 0 fd:01 9 /x\n"))
	f.Add([]byte("zz-2 r-xp 0 fd:01 9 /x\n1-2 r-xp g fd:01 9 /x\n1-2 r-xp 0 fd:01 -1 /x\n"))
	if ms, _ := filepath.Glob("testdata/maps/*.maps"); len(ms) > 0 {
		if b, err := os.ReadFile(ms[0]); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ms := ParseMaps(bytes.NewReader(data))
		if len(ms) > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d mappings from %d lines", len(ms), bytes.Count(data, []byte("\n"))+1)
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Path, "/") || !bytes.Contains(data, []byte(m.Path)) {
				t.Fatalf("path %q", m.Path)
			}
			if strings.ContainsAny(m.Perms, " \n") || strings.ContainsAny(m.Dev, " \n") {
				t.Fatalf("fields %+v", m)
			}
			if m.Deleted && !bytes.Contains(data, []byte(m.Path+" (deleted)")) {
				t.Fatalf("deleted without the mark: %+v", m)
			}
		}
	})
}

func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.0+cu124\nSummary: x\n\nbody Name: no\n"))
	f.Add([]byte("Name:\r\nVersion:   \r\n\r\n"))
	f.Add([]byte("\nName: after-the-headers\n"))
	f.Add([]byte("Name: a\nName: b\nVersion: 1\x00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, ver := parseMetadata(data, "dflt", "v0")
		for _, v := range []string{name, ver} {
			if strings.ContainsAny(v, "\n") {
				t.Fatalf("a value spans lines: %q", v)
			}
		}
		if name != "dflt" && !bytes.Contains(data, []byte(name)) || ver != "v0" && !bytes.Contains(data, []byte(ver)) {
			t.Fatalf("%q %q not from the file", name, ver)
		}
	})
}

func FuzzParsePth(f *testing.F) {
	finder := []byte("MAPPING: dict[str, str] = {'kext': '/src/kext/kext', \"b\": \"/src/b/b\"}\n")
	f.Add([]byte("# comment\n/abs/dir\nrel/dir\n\nimport __editable___kext_0_1_finder; __editable___kext_0_1_finder.install()\n"), finder)
	f.Add([]byte("import os\n../../etc\n"), []byte("MAPPING = {'a': 'relative/pkg', 'b': ''}"))
	f.Add([]byte("import __editable___x_finder\n"), []byte("MAPPING = {'a':'/'}"))
	f.Add([]byte("import __editable___x_finder\n"), []byte("MAPPING = {'a': 'relative/pkg'}"))
	f.Fuzz(func(t *testing.T, data, src []byte) {
		for _, d := range parsePth(data, "/site", func(string) []byte { return src }) {
			if !filepath.IsAbs(d) {
				t.Fatalf("relative directory %q (it would be read relative to kcrash's own directory)", d)
			}
		}
	})
}

func FuzzParseDirectURL(f *testing.F) {
	f.Add([]byte(`{"url": "file:///src/kext", "dir_info": {"editable": true}}`))
	f.Add([]byte(`{"url": "file:relative", "dir_info": {"editable": true}}`))
	f.Add([]byte(`{"url": "https://x/y.whl", "dir_info": {"editable": true}}`))
	f.Add([]byte(`{"url": "file://host", "dir_info": {"editable": true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if src, ok := parseDirectURL(data); ok && !filepath.IsAbs(src) {
			t.Fatalf("checkout %q is not absolute", src)
		}
	})
}

// FuzzGitFiles feeds the git readers a HEAD, a config, a packed-refs and a
// loose commit object's text: what they return is a ref git would resolve
// inside the git directory, or a commit id, or nothing.
func FuzzGitFiles(f *testing.F) {
	h1, h2 := strings.Repeat("a1", 20), strings.Repeat("b2", 20)
	f.Add("ref: refs/heads/main", []byte("[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"),
		[]byte("# pack-refs with: peeled\n"+h1+" refs/heads/main\n"+h2+" refs/remotes/origin/main\n^"+h2+"\n"),
		[]byte("commit 200\x00tree "+h1+"\nparent "+h2+"\nauthor x\n\nmsg\n"))
	f.Add("ref: ../../outside", []byte("[branch \"x\"]\nremote=../../..\nmerge=outside\n"), []byte(h1+" ../../outside\n"), []byte("commit 1\x00parent 1\n"))
	f.Add("ref: refs/heads/../../../outside", []byte("[branch \"x.lock\"]\n"), []byte(""), []byte("blob 3\x00abc"))
	f.Add(h1, []byte(""), []byte("\n\n"), []byte(""))
	f.Fuzz(func(t *testing.T, head string, config, packed, commit []byte) {
		ref, c := parseHead(head)
		if ref != "" && !validRef(ref) || c != "" && !isHash(c) || ref != "" && c != "" {
			t.Fatalf("HEAD %q: ref %q commit %q", head, ref, c)
		}
		branch := strings.TrimPrefix(ref, "refs/heads/")
		remote, merge := parseBranchUpstream(config, branch)
		if strings.Contains(remote+merge, "\n") {
			t.Fatalf("upstream %q %q spans lines", remote, merge)
		}
		if ref != "" {
			if h := packedRef(bytes.NewReader(packed), ref); h != "" && !isHash(h) {
				t.Fatalf("packed %q for %q", h, ref)
			}
		}
		if p, ok := parseCommitParent(commit); p != "" && (!ok || !bytes.Contains(commit, []byte(p))) {
			t.Fatalf("parent %q", p)
		}
	})
}

func FuzzValidRef(f *testing.F) {
	for _, s := range []string{"refs/heads/main", "refs/heads/../x", "/etc/x", "refs//x", "refs/x.lock", "refs/.x", "refs/x/", "refs/a@{1}", "refs/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if !validRef(ref) {
			return
		}
		j := filepath.Join("/g", filepath.FromSlash(ref))
		if !strings.HasPrefix(j, "/g/refs/") || filepath.Clean(j) != "/g/"+ref {
			t.Fatalf("valid ref %q leaves the git directory: %s", ref, j)
		}
	})
}
