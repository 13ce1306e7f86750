package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/kcrash/kcrash/internal/human"
	"github.com/kcrash/kcrash/internal/visible"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kcrash/kcrash/upload"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// uploadCmdOptions are `kcrash upload`'s arguments.
type uploadCmdOptions struct {
	IO              *streams
	Bundle          string
	To              []string
	DryRun, JSON    bool
	AllowUnredacted bool
	ADF             bool
	MaxSize         byteSize
	BundleURL       string
	Config          string
}

func init() { register(func(s *streams) *cobra.Command { return newUploadCmd(s, nil) }) }

func newUploadCmd(s *streams, runF func(*uploadCmdOptions) error) *cobra.Command {
	o := &uploadCmdOptions{IO: s}
	c := &cobra.Command{
		Use:   "upload BUNDLE --to TARGET",
		Short: "Attach a bundle to a ticket (Jira, GitLab, GitHub, Gitea), or PUT or copy it",
		Long: `Send a crash bundle where people will look at it, with a comment carrying the
verdict and the triage summary.

Targets (--to, repeatable; taken in order):
  jira:KEY-123                   attachment + comment   JIRA_URL, JIRA_USER + JIRA_API_TOKEN, or JIRA_PAT
  gitlab:group/project#IID       upload + note          GITLAB_TOKEN, GITLAB_URL (default https://gitlab.com)
  github:owner/repo#N            comment with a link    GITHUB_TOKEN, GITHUB_API_URL (Enterprise)
  gitea:https://host/owner/repo#N  attachment + comment GITEA_TOKEN
  https://... or http://...      PUT with a Content-Length (pre-signed object-store URLs)
  s3://bucket/prefix             object prefix/NAME     the AWS SDK's chain: AWS_ACCESS_KEY_ID..., AWS_PROFILE,
                                                        ~/.aws, web identity, instance role; AWS_REGION;
                                                        AWS_ENDPOINT_URL_S3 for an S3-compatible server
  file:///path                   a copy (a path ending in / is a directory)

Credentials come only from the environment or the config file's credentials:
section (s3://: the AWS SDK's own chain), never from flags. An existing
object or file is never overwritten. GitHub cannot hold files: put the bundle first
(--to https://... --to github:o/r#1) or pass --bundle-url.

Before anything is sent the bundle is scanned for secrets again; a hit is
refused, naming the file and line, unless --allow-unredacted.`,
		Example: `  kcrash upload kcrash-20260301T120000Z-node1-4242.tar.gz --to jira:INFRA-123
  kcrash upload B.tar.gz --to gitlab:ml/serving#42 --dry-run
  kcrash upload B.tar.gz --to "$PRESIGNED_URL" --to github:org/repo#7 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(o.To) == 0 {
				return usagef("upload needs --to TARGET (jira:KEY-123, gitlab:group/project#IID, github:owner/repo#N, gitea:https://host/owner/repo#N, https://..., s3://bucket/prefix, file:///path)")
			}
			for _, t := range o.To {
				if _, err := upload.ParseTarget(t); err != nil {
					return &usageError{err}
				}
			}
			if o.BundleURL != "" {
				u, err := url.Parse(o.BundleURL)
				if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
					return usagef("--bundle-url wants an http(s) URL")
				}
			}
			o.Bundle = args[0]
			if runF != nil {
				return runF(o)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return uploadRun(ctx, o)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&o.To, "to", nil, "where to send the bundle: `TARGET` (repeatable)")
	f.BoolVar(&o.DryRun, "dry-run", false, "show exactly what would be sent where, and send nothing")
	f.BoolVar(&o.JSON, "json", false, "print what was created (ids and URLs) as JSON")
	f.BoolVar(&o.AllowUnredacted, "allow-unredacted", false, "send even if the bundle seems to hold a secret")
	f.BoolVar(&o.ADF, "adf", false, "Jira: comment through REST v3 in Atlassian Document Format (Cloud)")
	f.Var(&o.MaxSize, "max-size", "refuse bundles larger than `SIZE` (e.g. 20MiB; default: the target's own limit)")
	f.StringVar(&o.BundleURL, "bundle-url", "", "where the bundle can be downloaded, for targets that cannot hold it (GitHub)")
	configFlag(c, &o.Config)
	return c
}

// uploadRun sends o.Bundle to each target in turn and prints what was
// created (or, with --dry-run, what would be sent).
func uploadRun(ctx context.Context, o *uploadCmdOptions) error {
	s := o.IO
	cfg, err := loadConfig(o.Config)
	if err != nil {
		return err
	}
	opts := uploadOptions(s, cfg)
	opts.DryRun = o.DryRun
	opts.AllowUnredacted = o.AllowUnredacted
	opts.ADF = o.ADF
	opts.MaxSize = int64(o.MaxSize)
	opts.BundleURL = o.BundleURL
	res, err := upload.DoAll(ctx, o.Bundle, o.To, opts)
	if o.JSON {
		if res == nil {
			res = []*upload.Result{}
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		jerr := enc.Encode(res)
		if jerr == nil {
			_, jerr = s.Out.Write(visible.JSON(out.Bytes()))
		}
		if jerr != nil && err == nil {
			err = jerr
		}
	} else {
		for _, r := range res {
			if r.DryRun {
				printPlan(s.Out, r)
			} else {
				reportUpload(s.Out, "", r)
			}
		}
	}
	return err
}

// uploadOptions are the settings `kcrash upload` and `kcrash run --upload`
// share: credentials from the environment, else the config file's
// credentials section; retry notices on stderr; a progress bar only when
// stderr is a terminal, so logs and CI output stay clean.
func uploadOptions(s *streams, cfg *userConfig) upload.Options {
	o := upload.Options{Log: s.Err}
	o.Env = func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		if cfg != nil {
			return cfg.Credentials[k]
		}
		return ""
	}
	if f, ok := s.Err.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		o.Progress = s.Err
	}
	return o
}

// reportUpload prints what an upload made, one line each; prefix is
// "kcrash: " when the lines share stderr with a supervised child's output.
func reportUpload(w io.Writer, prefix string, r *upload.Result) {
	say := func(verb string, c *upload.Created) {
		if c == nil {
			return
		}
		line := prefix + r.Target + ": " + verb
		if c.Reused {
			line += " (already there, not added again)"
		}
		if c.ID != "" {
			line += " id " + c.ID
		}
		if c.URL != "" {
			line += " " + c.URL
		}
		fmt.Fprintln(w, visible.Line(line)) // ids and URLs come from the server
	}
	switch r.Kind {
	case upload.HTTP, upload.S3:
		say("put", r.Attachment)
	case upload.File:
		say("copied", r.Attachment)
	case upload.GitHub:
		say("commented", r.Comment)
	default:
		say("attached", r.Attachment)
		say("commented", r.Comment)
	}
}

// printPlan shows a dry run: each request with its headers (credentials by
// name only) and its body, comments as the text a reader will see.
func printPlan(w io.Writer, r *upload.Result) {
	// The comment quotes the bundle's summary, which quotes the child's
	// output: shown, never interpreted by the terminal.
	v := visible.Line
	fmt.Fprintf(w, "dry run: %s (%s, sha256 %s) to %s; nothing sent\n", v(r.Bundle), human.Bytes(r.Size), r.SHA256, v(r.Target))
	for i, st := range r.Plan {
		fmt.Fprintf(w, "\n%d. %s %s\n   (%s)\n", i+1, st.Method, v(st.URL), st.Why)
		for _, h := range st.Headers {
			fmt.Fprintf(w, "   %s\n", v(h))
		}
		switch {
		case st.Comment != "":
			fmt.Fprintf(w, "   body: JSON (--json shows it exactly) with this text:\n")
			for _, l := range strings.Split(strings.TrimRight(st.Comment, "\n"), "\n") {
				fmt.Fprintf(w, "   | %s\n", v(l))
			}
		case st.Body != "":
			fmt.Fprintf(w, "   body: %s\n", v(st.Body))
		}
	}
}
