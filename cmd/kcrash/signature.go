package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	table  string // a normalisation table to compare with the built-in one
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
"kcrash triage FILE" does.

With --table FILE, each input's signature is computed twice, with the
built-in table (old) and with FILE (new), and marked same or changed, as
Socorro's signature command does before a change to its rules ships: run it
over the corpus (or a day's bundles) to see which buckets a table edit splits
or merges; a change of any signature needs crashsig.Version bumped. Exit 0
when every input was read, 1 otherwise.`, crashsig.Version, crashsig.MaxTitle, causeList()),
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
	c.Flags().StringVar(&o.table, "table", "", "also compute each signature with the normalisation table in `FILE` (new) and say what changed")
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
	// WithTable is the signature under --table's table; TableSame says
	// whether it equals Signature (fine and coarse).
	WithTable *bundle.Signature `json:"with_table,omitempty"`
	TableSame *bool             `json:"table_same,omitempty"`
}

func runSignature(o *signatureOptions) error {
	var table *crashsig.Table
	if o.table != "" {
		data, err := os.ReadFile(o.table)
		if err != nil {
			return usagef("signature: --table: %v", err)
		}
		if table, err = crashsig.LoadTable(data, o.table); err != nil {
			return usagef("signature: --table: %v", err)
		}
	}
	var all []signatureOf
	changed := 0
	for _, name := range o.files {
		got, in, err := signatureOfFile(o, name)
		if err != nil {
			return err
		}
		if table != nil {
			s := crashsig.ComputeWith(in, crashsig.DefaultRules, table)
			same := s.Fine == got.Signature.Fine && s.Coarse == got.Signature.Coarse
			got.WithTable, got.TableSame = &s, &same
			if !same {
				changed++
			}
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
		if g.WithTable != nil {
			verdict := "same"
			if !*g.TableSame {
				verdict = "CHANGED"
			}
			fmt.Fprintf(w, "  old:    %s %s\n  new:    %s %s (%s, with %s)\n", s.Fine, s.Coarse, g.WithTable.Fine, g.WithTable.Coarse, verdict, o.table)
			if !*g.TableSame {
				fmt.Fprintf(w, "  new key: %s\n", g.WithTable.Key)
			}
		}
	}
	if table != nil {
		fmt.Fprintf(w, "%d inputs: %d same, %d changed with %s\n", len(all), len(all)-changed, changed, o.table)
	}
	return w.Flush()
}

// signatureOfFile also returns the input the signature was computed from,
// for --table's second computation.
func signatureOfFile(o *signatureOptions, name string) (signatureOf, crashsig.Input, error) {
	if isBundle(o.IO, name) {
		b, err := bundle.Open(name)
		if err != nil {
			return signatureOf{}, crashsig.Input{}, err
		}
		in, err := crashsig.FromManifest(&b.Manifest)
		if err != nil {
			return signatureOf{}, in, fmt.Errorf("%s: %v", name, err)
		}
		got := signatureOf{File: name, Signature: crashsig.Compute(in), Stored: b.Manifest.Signature}
		if got.Stored != nil {
			same := got.Stored.Version == got.Signature.Version && got.Stored.Fine == got.Signature.Fine && got.Stored.Coarse == got.Signature.Coarse
			got.Same = &same
		}
		return got, in, nil
	}
	res, err := triageFiles(&triageOptions{IO: o.IO, logs: []string{name}, year: o.year, maxLog: gzcap.Default})
	if err != nil {
		return signatureOf{}, crashsig.Input{}, err
	}
	in := crashsig.FromTriage(res, "")
	return signatureOf{File: name, Signature: crashsig.Compute(in)}, in, nil
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
