package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kcrash/kcrash/evidence"
	"github.com/kcrash/kcrash/internal/gzcap"
	"github.com/kcrash/kcrash/internal/visible"
	"github.com/kcrash/kcrash/kernelapi"
	"github.com/kcrash/kcrash/kernlog"
	"github.com/kcrash/kcrash/triage"
	"github.com/spf13/cobra"
)

type triageOptions struct {
	IO                        *streams
	logs, dmesgs, kapis, smis []string
	asJSON                    bool
	year                      int
	config                    string
	maxLog                    byteSize
}

func init() { register(func(s *streams) *cobra.Command { return newTriageCmd(s, nil) }) }

func newTriageCmd(s *streams, runF func(*triageOptions) error) *cobra.Command {
	o := &triageOptions{IO: s, maxLog: gzcap.Default}
	c := &cobra.Command{
		Use:   "triage [FILE]... [--log F]... [--dmesg F]... [--kernel-api-log F]... [--smi F]...",
		Short: "Classify evidence files offline: one root-cause verdict, its evidence, next steps",
		Long: `Run kcrash's triage on files from a node where kcrash was not running: program
output (--log), kernel messages in any dmesg/journal/syslog form (--dmesg),
SGLang/FlashInfer kernel-API logs (--kernel-api-log, several per-pid files are
merged by time) and GPU tool output (--smi). A FILE given without a flag has
its kind guessed: a kernel-API log by its call headers, anything else is read
as program output and kernel messages at once (as --log is: kernel lines
pasted into a program's log are kernel evidence too). "-" is stdin; .gz files
are read transparently. Exit 0 when analysed, 1 when an input cannot be read.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				kind, err := guessInputKind(s, a)
				if err != nil {
					return err
				}
				if kind == "kernel-api-log" {
					o.kapis = append(o.kapis, a)
				} else {
					o.logs = append(o.logs, a)
				}
			}
			if len(o.logs)+len(o.dmesgs)+len(o.kapis)+len(o.smis) == 0 {
				return usagef("triage: give a FILE or at least one of --log, --dmesg, --kernel-api-log, --smi")
			}
			cfg, err := loadConfig(o.config)
			if err != nil {
				return err
			}
			if err := loadUserSignatures(cfg); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runTriage(o)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&o.logs, "log", nil, "program output `FILE` (repeatable)")
	f.StringArrayVar(&o.dmesgs, "dmesg", nil, "kernel messages `FILE` (repeatable)")
	f.StringArrayVar(&o.kapis, "kernel-api-log", nil, "kernel-API log `FILE` (repeatable)")
	f.StringArrayVar(&o.smis, "smi", nil, "nvidia-smi/rocm-smi/amd-smi output `FILE` (repeatable)")
	f.BoolVar(&o.asJSON, "json", false, "print the SPEC §5 JSON object")
	f.IntVar(&o.year, "year", time.Now().Year(), "year of syslog timestamps, which carry none")
	f.Var(&o.maxLog, "max-log-bytes", "the most a gzipped `SIZE` file may decompress to")
	configFlag(c, &o.config)
	return c
}

// openInput opens a file, "-" for stdin, un-gzipping when the content is
// gzip, up to maxLog bytes decompressed.
func openInput(s *streams, name string, maxLog int64) (io.ReadCloser, error) {
	var r io.ReadCloser = io.NopCloser(s.In)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			f.Close()
			return nil, fmt.Errorf("%s: is a directory, not an evidence file", name)
		}
		r = f
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzcap.NewReader(br, name, maxLog)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		return struct {
			io.Reader
			io.Closer
		}{gz, r}, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{br, r}, nil
}

func runTriage(o *triageOptions) error {
	s := o.IO
	res, err := triageFiles(o)
	if err != nil {
		return err
	}
	if o.asJSON {
		return writeJSON(s.Out, res)
	}
	// the evidence lines are the logs' own text
	_, err = s.Out.Write(visible.Bytes([]byte(triage.Summary(res, triage.SummaryMeta{}))))
	return err
}

// triageFiles triages the option's evidence files together.
func triageFiles(o *triageOptions) (triage.Result, error) {
	s := o.IO
	var findings []evidence.Finding
	var checked []string
	scan := func(files []string, what string, f func(io.Reader, string) ([]evidence.Finding, error)) error {
		for _, name := range files {
			r, err := openInput(s, name, int64(o.maxLog))
			if err != nil {
				return err
			}
			got, err := f(r, name)
			r.Close()
			if gzcap.IsTooLarge(err) {
				return err // it names the file
			}
			if err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			findings = append(findings, got...)
			checked = append(checked, what+" "+name)
		}
		return nil
	}
	if err := scan(o.logs, "log", func(r io.Reader, name string) ([]evidence.Finding, error) {
		return triage.ScanEvidenceText(r, name, o.year)
	}); err != nil {
		return triage.Result{}, err
	}
	var arches []string
	if err := scan(o.smis, "smi", func(r io.Reader, name string) ([]evidence.Finding, error) {
		// the GPUs' arch, for a log that does not name it
		text := &headBuffer{max: 16 << 20}
		fs, err := triage.ScanLog(io.TeeReader(r, text), name)
		if a := triage.ArchFromSMI(text.String()); a != "" {
			arches = append(arches, a)
		}
		for i := range fs {
			fs[i].Source = evidence.SourceSMI
		}
		return fs, err
	}); err != nil {
		return triage.Result{}, err
	}
	if err := scan(o.dmesgs, "dmesg", func(r io.Reader, name string) ([]evidence.Finding, error) {
		fs, err := kernlog.ParseReader(r, o.year)
		for i := range fs {
			fs[i].File = name
		}
		return fs, err
	}); err != nil {
		return triage.Result{}, err
	}
	var kapi *kernelapi.Report
	if len(o.kapis) > 0 {
		var inputs []kernelapi.NamedReader
		for _, name := range o.kapis {
			r, err := openInput(s, name, int64(o.maxLog))
			if err != nil {
				return triage.Result{}, err
			}
			defer r.Close()
			inputs = append(inputs, kernelapi.NamedReader{Name: name, Reader: r})
		}
		rep, err := kernelapi.AnalyzeReaders(inputs)
		if err != nil {
			return triage.Result{}, err
		}
		kapi = rep
		checked = append(checked, "kernel-API log")
	}
	return triage.Decide(triage.Input{Findings: findings, KernelAPI: kapi, Checked: checked, GPUArch: strings.Join(arches, ", ")}), nil
}

// guessInputKind sniffs a positional FILE: a SGLang/FlashInfer kernel-API log
// announces itself in its first lines; anything else is read as output (which
// also finds kernel messages in it). stdin cannot be read twice, so "-" is output.
func guessInputKind(s *streams, name string) (string, error) {
	if name == "-" {
		return "log", nil
	}
	r, err := openInput(s, name, gzcap.Default) // only its head is read
	if err != nil {
		return "", err
	}
	defer r.Close()
	head := make([]byte, 16<<10)
	n, _ := io.ReadFull(r, head)
	head = head[:n]
	if bytes.Contains(head, []byte("SGLang Kernel API Call: ")) || bytes.Contains(head, []byte("FlashInfer API Call: ")) ||
		bytes.Contains(head, []byte("FlashInfer API Logging")) {
		return "kernel-api-log", nil
	}
	return "log", nil
}

// loadUserSignatures adds the config's extra log signatures (signatures: FILE).
func loadUserSignatures(cfg *userConfig) error {
	if cfg.Signatures == "" {
		return nil
	}
	data, err := readBounded(cfg.Signatures, signaturesMax)
	if err != nil {
		return fmt.Errorf("signatures: %v", err)
	}
	sigs, err := triage.LoadSignatures(data, cfg.Signatures)
	if err != nil {
		return err
	}
	return triage.SetExtraSignatures(sigs)
}

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	bytes.Buffer
	max int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
