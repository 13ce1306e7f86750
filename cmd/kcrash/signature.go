package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/internal/gzcap"
)

type signatureOptions struct {
	IO     *streams
	files  []string
	asJSON bool
	year   int
}

func init() { register(func(s *streams) *cobra.Command { return newSignatureCmd(s, nil) }) }

func newSignatureCmd(s *streams, runF func(*signatureOptions) error) *cobra.Command {
	o := &signatureOptions{IO: s}
	c := &cobra.Command{
		Use:   "signature BUNDLE|LOG...",
		Short: "Print the crash signature of bundles or logs: the key that buckets one bug across a fleet",
		Long: fmt.Sprintf(`Print each input's crash signature (version %d): a fine and a coarse key and a
title of at most %d characters. The fine key is the verdict kind, the fault
record's stable fields (amdgpu hub, client and fault bits; the Xid and its
fault type; HSA/HIP/CUDA error names; the signal), the suspect kernel-API call
with its dtypes and tensor ranks, and the top in-app frames. What varies
between occurrences of one bug (addresses, pids, pasid/vmid, GPU and node
numbers, PCI addresses, timestamps, tensor sizes, request ids, temporary and
home paths) is normalised by the table in configs/normalize.yaml. Known causes
replace the stack: %s.

A BUNDLE's signature is recomputed from its triage and compared with the one
stored in its manifest (old, new, same?); a LOG is triaged first, as
"kcrash triage FILE" does. Exit 0 when every input was read, 1 otherwise.`, crashsig.Version, crashsig.MaxTitle, causeList()),
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.files = args
			if runF != nil {
				return runF(o)
			}
			return runSignature(o)
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "print a JSON array: file, signature, stored, same")
	c.Flags().IntVar(&o.year, "year", time.Now().Year(), "year of syslog timestamps, which carry none")
	return c
}

func causeList() string {
	var out []string
	for _, c := range crashsig.Causes() {
		out = append(out, c[0]+" ("+c[1]+")")
	}
	return strings.Join(out, ", ")
}

// signatureOf is one input's signature: the recomputed one, and for a
// bundle the one its manifest holds (nil when it predates signatures).
type signatureOf struct {
	File      string            `json:"file"`
	Signature bundle.Signature  `json:"signature"`
	Stored    *bundle.Signature `json:"stored,omitempty"`
	Same      *bool             `json:"same,omitempty"`
}

func runSignature(o *signatureOptions) error {
	var all []signatureOf
	for _, name := range o.files {
		got, err := signatureOfFile(o, name)
		if err != nil {
			return err
		}
		all = append(all, got)
	}
	if o.asJSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	w := bufio.NewWriter(o.IO.Out)
	for _, g := range all {
		s := g.Signature
		fmt.Fprintf(w, "%s\n  title:  %s\n  fine:   %s\n  coarse: %s\n", g.File, s.Title, s.Fine, s.Coarse)
		if s.Class != "" {
			fmt.Fprintf(w, "  class:  %s\n", s.Class)
		}
		fmt.Fprintf(w, "  key:    %s\n", s.Key)
		if g.Stored != nil {
			fmt.Fprintf(w, "  stored: v%d %s %s (same: %v)\n", g.Stored.Version, g.Stored.Fine, g.Stored.Title, *g.Same)
		}
	}
	return w.Flush()
}

func signatureOfFile(o *signatureOptions, name string) (signatureOf, error) {
	if isBundle(o.IO, name) {
		b, err := bundle.Open(name)
		if err != nil {
			return signatureOf{}, err
		}
		in, err := crashsig.FromManifest(&b.Manifest)
		if err != nil {
			return signatureOf{}, fmt.Errorf("%s: %v", name, err)
		}
		got := signatureOf{File: name, Signature: crashsig.Compute(in), Stored: b.Manifest.Signature}
		if got.Stored != nil {
			same := got.Stored.Version == got.Signature.Version && got.Stored.Fine == got.Signature.Fine && got.Stored.Coarse == got.Signature.Coarse
			got.Same = &same
		}
		return got, nil
	}
	res, err := triageFiles(&triageOptions{IO: o.IO, logs: []string{name}, year: o.year, maxLog: gzcap.Default})
	if err != nil {
		return signatureOf{}, err
	}
	return signatureOf{File: name, Signature: crashsig.Compute(crashsig.FromTriage(res, ""))}, nil
}

// isBundle tells a bundle (a gzip'd tar holding manifest.json at its top
// directory's root) from a log, which may be gzip'd too.
func isBundle(s *streams, name string) bool {
	if name == "-" {
		return false
	}
	r, err := openInput(s, name, gzcap.Default)
	if err != nil {
		return false
	}
	defer r.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(r, head)
	head = head[:n]
	// A tar header: the entry name first, "ustar" at offset 257.
	return n >= 262 && bytes.Equal(head[257:262], []byte("ustar"))
}
