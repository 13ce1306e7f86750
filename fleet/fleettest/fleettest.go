// Package fleettest writes bundles for fleet tests the way kcrash writes
// them (triage, crashsig, the bundle writer) from real evidence (the corpus),
// with the volatile fields a real fleet varies: pids, addresses, times, and
// the GPU the record names.
package fleettest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/bundle"
	"github.com/kcrash/kcrash/crashsig"
	"github.com/kcrash/kcrash/internal/testcorpus"
	"github.com/kcrash/kcrash/software"
	"github.com/kcrash/kcrash/triage"
)

// Spec is one bundle.
type Spec struct {
	Out       string // directory the bundle goes to
	Host      string
	Time      time.Time // the run's end
	Job       string
	Rank      int
	LocalRank int
	Log       string // the evidence: program output, kernel lines included
	// BusID and UUID replace every PCI address and GPU UUID in Log: the
	// device this fault happened on.
	BusID, UUID string
	// Stack: GPU Python packages by name; the keys "nvidia-driver", "cuda",
	// "rocm" set the runtime versions instead.
	Stack  map[string]string
	Kernel string
	// NoSignature writes the manifest as a kcrash older than signatures did.
	NoSignature bool
	// Stored replaces the signature in the manifest: what a kcrash of
	// another signature version wrote.
	Stored *bundle.Signature
	Seed   uint64 // varies pids and addresses
}

var (
	pciRe   = regexp.MustCompile(`\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(\.[0-7])?\b`)
	uuidRe  = regexp.MustCompile(`\bGPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	pidRe   = regexp.MustCompile(`\b(pid[=: ]\s*'?)\d+`)
	addrRe  = regexp.MustCompile(`\b0x0000[0-9a-f]{12}\b|\b0x7f[0-9a-f]{10}\b`)
	pasidRe = regexp.MustCompile(`\b(pasid:)\d+`)
	vmidRe  = regexp.MustCompile(`\b(vmid:)\d+`)
)

// Vary rewrites the volatile fields of a real log as another occurrence of
// the same bug would print them.
func (s Spec) Vary() string {
	r := rand.New(rand.NewPCG(s.Seed, 0x6b637261))
	log := s.Log
	if s.BusID != "" {
		short := strings.TrimSuffix(s.BusID, s.BusID[strings.LastIndexByte(s.BusID, '.'):])
		log = pciRe.ReplaceAllStringFunc(log, func(m string) string {
			if strings.Contains(m, ".") {
				return s.BusID
			}
			return short
		})
	}
	if s.UUID != "" {
		log = uuidRe.ReplaceAllString(log, s.UUID)
	}
	log = pidRe.ReplaceAllStringFunc(log, func(m string) string {
		return pidRe.ReplaceAllString(m, fmt.Sprintf("${1}%d", 1000+r.IntN(4000000)))
	})
	log = pasidRe.ReplaceAllString(log, fmt.Sprintf("${1}%d", 32768+r.IntN(64)))
	log = vmidRe.ReplaceAllString(log, fmt.Sprintf("${1}%d", 1+r.IntN(15)))
	log = addrRe.ReplaceAllStringFunc(log, func(string) string { return fmt.Sprintf("0x00007f%010x", r.Uint64()&0xffffff000) })
	return log
}

// Write triages the spec's evidence, writes the bundle with kcrash's bundle
// writer and returns its path; a failure fails the test.
func Write(t testing.TB, s Spec) string {
	t.Helper()
	p, err := WriteErr(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteErr is Write for programs (bench/gen-fleet).
func WriteErr(s Spec) (string, error) {
	log := s.Vary()
	fs, err := triage.ScanEvidenceText(strings.NewReader(log), "output.log", s.Time.Year())
	if err != nil {
		return "", err
	}
	res := triage.Decide(triage.Input{Findings: fs, Checked: []string{"output.log"}})
	tj, err := json.Marshal(res)
	if err != nil {
		return "", err
	}
	pid := 1000 + int(s.Seed%60000)
	stage, err := bundle.NewStage(s.Out, bundle.Name(s.Time, s.Host, pid, fmt.Sprint(s.Rank)))
	if err != nil {
		return "", err
	}
	defer stage.Remove()
	write := func(name string, data []byte) error {
		return os.WriteFile(filepath.Join(stage.Dir, name), data, 0o644)
	}
	if err := write("output.log", []byte(log)); err != nil {
		return "", err
	}
	if len(s.Stack) > 0 {
		rep := software.Report{SchemaVersion: 1, Python: []software.Python{{Executable: "/usr/bin/python3", Version: "3.11"}}}
		for name, v := range s.Stack {
			switch name {
			case "nvidia-driver":
				rep.Runtime.NVIDIADriver = v
			case "cuda":
				rep.Runtime.CUDA = v
			case "rocm":
				rep.Runtime.ROCm = v
			default:
				rep.Python[0].Packages = append(rep.Python[0].Packages, software.Package{Name: name, Version: v, GPU: true})
			}
		}
		b, _ := json.Marshal(rep)
		if err := write("software.json", b); err != nil {
			return "", err
		}
	}
	if s.BusID != "" {
		g := map[string]any{"snapshot": map[string]any{"time": s.Time, "gpus": []map[string]any{
			{"index": s.LocalRank, "bus_id": s.BusID, "name": "Test GPU", "vendor": "nvidia", "source": "test"}}}}
		b, _ := json.Marshal(g)
		if err := write("gpu.json", b); err != nil {
			return "", err
		}
	}
	rank, local := s.Rank, s.LocalRank
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, KcrashVersion: "test", Mode: "run",
		Command: []string{"python3", "-m", "sglang.launch_server"}, Cwd: "/", StartTime: s.Time.Add(-time.Hour).UTC(), EndTime: s.Time.UTC(),
		Host:   bundle.Host{Hostname: s.Host, Kernel: s.Kernel, GPUs: []string{}},
		Job:    &bundle.Job{Scheduler: "slurm", JobID: s.Job, Rank: &rank, LocalRank: &local, Node: s.Host},
		Env:    bundle.Env{Profiles: []string{}, Set: map[string]string{}, Kept: map[string]string{}, User: map[string]string{}},
		Triage: tj, Collectors: []bundle.CollectorStatus{}, Truncated: []string{}}
	code := 1
	m.Exit.Code = &code
	if !s.NoSignature {
		sig := crashsig.Compute(crashsig.FromTriage(res, ""))
		m.Signature = &sig
	}
	if s.Stored != nil {
		m.Signature = s.Stored
	}
	out, err := stage.Write(m, bundle.WriteOptions{Out: s.Out, Fallback: s.Out})
	if err != nil {
		return "", err
	}
	return out.Path, nil
}

// Corpus reads a corpus file without its source/expect header.
func Corpus(t testing.TB, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for range 2 {
		if strings.HasPrefix(s, "source:") || strings.HasPrefix(s, "expect:") {
			_, s, _ = strings.Cut(s, "\n")
		}
	}
	return s
}

// Mixed writes a small fleet from real corpus evidence into a new
// directory and returns it: h1's GPU faults under Xid 13 and Xid 119 across
// an upgrade (hardware-suspect on counts), h9.cluster.example's GPU fell
// off the bus (hardware by its record), h2..h5 share one HIP illegal
// address after sglang 0.5.3 (software-suspect). Times are before now.
func Mixed(t testing.TB, now time.Time) string {
	t.Helper()
	corpus := testcorpus.Dir(t)
	log := func(rel string) string { return Corpus(t, corpus, rel) }
	xid13 := log("3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt")
	xid119 := log("3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt")
	bus := log("3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt")
	hip := log("2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	dir := t.TempDir()
	seed := uint64(0)
	w := func(host string, ago time.Duration, text, busID, uuid string, stack map[string]string) {
		seed++
		Write(t, Spec{Out: dir, Host: host, Time: now.Add(-ago), Job: "j" + host, Log: text, BusID: busID, UUID: uuid, Stack: stack, Seed: seed})
	}
	old := map[string]string{"sglang": "0.5.2"}
	up := map[string]string{"sglang": "0.5.3"}
	bad := "GPU-badbadba-0000-0000-0000-000000000001"
	w("h1", 70*time.Hour, xid13, "0000:9b:00.0", bad, old)
	w("h1", 30*time.Hour, xid119, "0000:9b:00.0", bad, up)
	w("h1", 2*time.Hour, xid13, "0000:9b:00.0", bad, up)
	w("h9.cluster.example", time.Hour, bus, "0000:c6:00.0", "GPU-99999999-0000-0000-0000-000000000009", old)
	for i, h := range []string{"h2", "h3", "h4", "h5"} {
		w(h, time.Duration(20-i)*time.Hour, hip, "", "", up)
	}
	return dir
}
