package triage

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kcrash/kcrash/evidence"
)

// Real crash logs from public issue threads that the rules were not written
// against (triage/testdata/unseen; each file: source:, expect:, blank line,
// then the text copied verbatim). dev/ was looked at while generalising the
// rules; heldout/ was set aside before any rule changed and is only ever
// scored. A miss is listed with the verdict it got, and the test fails when
// accuracy on any split drops under the floor reached so far. heldout4 was
// gathered for issue 25 (arch mismatches first) and split before the rules
// for it were written. heldout5 was gathered after every rule of issue 25
// and scored once (10 of 11; 11 of 11 once the ggml spelling of "invalid
// device function" it missed was added).
//
// dev6 and heldout6 (118 logs gathered for issue 25's "more real evidence",
// split at random before anything was scored; seed and method in
// testdata/unseen/FIRST-SIGHT.md) were scored at first sight (38/47,
// 55/71); dev6 is held to 47/47 since the rules for its misses landed,
// heldout6 was scored by count only (unseenBlind) until issue 25's rules
// landed, then scored once: 60 of 71 (85 %). Its misses are listed from
// then on, and it is held to that count. Read as a dev split after that, it
// is held to 71 of 71 since the rules for its 11 misses landed (general
// rules over each family; testdata/unseen/FIRST-SIGHT.md).
//
// heldout7 (47 more real logs, gathered for issue 25 while its last rules
// were being written, labelled by hand) was blind until those rules
// landed, then scored once: 41 of 47 (87 %). Its misses are listed from
// then on. Read as a dev split after that, it is held to 46 of 47 since the
// rules for its misses' families landed (launchers' signal reports, Windows
// NTSTATUS exit codes, NCCL result strings behind a wrapper, "device kernel
// image is invalid"; testdata/unseen/FIRST-SIGHT.md).
//
// heldout8 (70 more real logs, gathered by hand for issue 25's "scored
// once" split while heldout7's rules were written) was blind until those
// rules landed, then scored once: 54 of 70 (77 %). Its misses are listed
// from then on. Read as a dev split after that, it is held to 67 of 70
// since the rules for its misses' families landed (PyTorch's "Allocation on
// device" OOM, shells', TGI's and Open MPI's signal reports, tools' reports
// of a bad access, driver error names outside Python, NCCL's network
// failures, PyTorch's CPU allocator failing; testdata/unseen/FIRST-SIGHT.md).
//
// heldout9 (60 real logs gathered by hand for issue 25's "scored once"
// split after heldout8 was scored, picked without its misses) was blind
// until heldout8's rules landed, then scored once: 43 of 60 (72 %). Its
// misses are listed from then on. Read as a dev split after that, it is
// held to 57 of 60 since the rules for its misses' families landed (Intel
// GPU hangs, other GPUs' MMU faults, container exit 137 without OOMKilled,
// batch schedulers' wall-time kills, a bare crash-signal line, nvidia-smi's
// lost device handle, a loss with a suffixed name, vLLM's ranked worker
// prefix; testdata/unseen/FIRST-SIGHT.md).
//
// heldout10 (68 real logs gathered by hand for issue 25's "scored once" split
// after heldout9 was scored, picked without reading any split's misses or
// the rules) was blind until heldout9's rules landed, then scored once:
// 57 of 68 (84 %). Its misses are listed from then on. Read as a dev split
// after that, it is held to 64 of 68 since the rules for its misses'
// families landed (thread stacks stuck in a collective, vLLM's engine that
// never starts, Markdown and line-number gutters around watchdog lines,
// SIGTERM as Go and the DataLoader report it, PyTorch's segfault banner, the
// old THC ECC wording; testdata/unseen/FIRST-SIGHT.md).
//
// heldout11 (62 real logs gathered by hand for issue 25's "scored once"
// split after heldout10 was scored, picked without reading any split's
// misses or the rules) was blind until heldout10's rules landed, then scored
// once: 51 of 62 (82 %). Its misses are listed from then on. Read as a dev
// split after that, it is held to 60 of 62 since the rules for its misses'
// families landed (SGLang's scheduler watchdog, XLA's "Failed to allocate
// request", ggml's assert, the Go runtime's crash report, IPython's traceback
// header, a journal's "NVRM:" without host and tag, the GSP heartbeat/RPC
// timeout without its Xid 119, a symptom line merged into a watchdog timeout;
// testdata/unseen/FIRST-SIGHT.md).
//
// heldout12 (50 real logs gathered by hand for issue 25's "scored once"
// split after heldout11 was scored, picked without reading any split's
// misses or the rules) was blind until heldout11's rules landed, then scored
// once: 39 of 50 (78 %). Its misses are listed from then on. Read as a dev
// split after that, it is held to 50 of 50 since the rules for its misses'
// families landed (Windows access violations as Windows words them, stuck
// vLLM engines and an idle py-spy main thread, old ROCm wordings of a GPU
// OOM, the toolchain's arch mismatches, Kubernetes' pod JSON exit codes;
// testdata/unseen/FIRST-SIGHT.md).
//
// heldout13 (75 real logs gathered by hand for issue 25's "scored once"
// split after heldout12 was scored, taken in the order the search returned
// threads of the projects issue 25 names, without reading any split's misses
// or the rules) was blind until heldout12's rules and the generic fallback
// landed, then scored once: 53 of 75 (71 %). Its misses are listed from then
// on. The fallback also read one more log of heldout10 and of heldout11 (65
// of 68, 61 of 62). Read as a dev split after that, it is held to 65 of 75
// since the rules for its misses' families landed (a traceback that is its
// stream's last words without its exception line, a launcher's signal to its
// own workers no longer read as a kill on its own; the other misses' labels
// or families were judged and left: testdata/unseen/FIRST-SIGHT.md).
//
// heldout14 (60 real logs gathered by hand the same way after heldout13, from
// different queries, without reading any split's misses, the rules or
// heldout13's files) was blind until heldout13's rules landed, then scored
// once: 37 of 60 (62 %). Its misses are listed from then on. Read as a dev
// split after that, it is held to 46 of 60 since the rules for its misses'
// families landed (native stack frames that are their stream's last words,
// rocBLAS's Tensile library read without a gfx ISA in its name, systemd's
// report of a service's crash signal, a list of possible causes no longer
// read as the failure; the other misses' labels or families were judged and
// left: testdata/unseen/FIRST-SIGHT.md).
//
// heldout15 (50 real logs gathered by hand the same way after heldout14, from
// queries neither heldout13 nor heldout14 used, without reading any split's
// misses, the rules or heldout14's scoring) was blind until heldout14's rules
// landed, then scored once: 39 of 50 (78 %). Its misses are listed from then
// on. Read as a dev split after that, it is held to 43 of 50 since the rules
// for its misses' families landed (ggml's assert without its file:line and
// ollama's relay of it, Gloo's send/recv timeout, a nan/inf that ends a
// hyphenated name no longer read as a non-finite value; the other misses'
// labels or families were judged and left: testdata/unseen/FIRST-SIGHT.md).
//
// heldout16 (41 real logs gathered by hand the same way after heldout15, from
// queries none of heldout13 to heldout15 used, without reading any split's
// misses, the rules or heldout15's scoring) was blind until heldout15's rules
// landed, then scored once: 35 of 41 (85 %). Its misses are listed from then
// on. Read as a dev split after that, it is held to 40 of 41 since the rules
// for its misses' families and testdata/unseen/LABELS.md's calls landed
// (ggml's abort line, a traceback after a `^C` echo read as SIGINT, gdb's
// stacks of a live process that all wait, a driver error behind caffe2's
// check, rocminfo's OUT_OF_RESOURCES as no OOM, SGLang's failed health check,
// a Go runtime dump without its header); the same rules raised heldout13 to
// 67/75, heldout14 to 48/60 and heldout15 to 45/50 (FIRST-SIGHT.md).
//
// heldout17 (40 real logs gathered by hand the same way after heldout16, from
// queries none of heldout13 to heldout16 used, without reading any split's
// misses, the rules or heldout16's scoring) was blind until heldout16's rules
// landed, then scored once: 37 of 40 (92.5 %). Its misses are listed from
// then on. Read as a dev split after that, it is held to 39 of 40 since the
// rules for its misses' families landed (the NVIDIA open driver's
// NV_ERR_GPU_IS_LOST lines without Xid 79, faulthandler's frames without any
// header that end the log; aiter's `invalid resource handle` was judged and
// left); the same rules raised heldout14 to 49/60 (FIRST-SIGHT.md).
//
// heldout18 (50 real logs gathered by hand the same way after heldout17, from
// queries none of heldout13 to heldout17 used, the first split labelled with
// testdata/unseen/LABELS.md, without reading any split's misses, the rules or
// heldout17) was blind until heldout17's rules landed, then scored once: 41
// of 50 (82 %). Its misses are listed from then on. Read as a dev split after
// that, it is held to 45 of 50 since the rules for its misses' families
// landed (a device lost as Vulkan and Level Zero say it, TensorRT-LLM's
// executor creation failing for insufficient GPU memory; the others were
// judged and left, testdata/unseen/FIRST-SIGHT.md).
//
// heldout19 (34 real logs gathered by hand the same way after heldout18, from
// queries none of heldout13 to heldout18 used, labelled with
// testdata/unseen/LABELS.md, without reading any split's misses or the rules)
// is blind until a later session's rules land: its misses are counted, not
// listed, and its floor is 0 until it is scored once.
var unseenFloor = map[string]float64{"dev": 1.0, "heldout": 1.0, "heldout2": 1.0, "heldout3": 1.0, "heldout4": 1.0, "heldout5": 1.0,
	"dev6": 47.0 / 47, "heldout6": 71.0 / 71, "heldout7": 46.0 / 47, "heldout8": 67.0 / 70, "heldout9": 57.0 / 60, "heldout10": 65.0 / 68,
	"heldout11": 61.0 / 62, "heldout12": 50.0 / 50, "heldout13": 67.0 / 75, "heldout14": 49.0 / 60,
	"heldout15": 45.0 / 50, "heldout16": 40.0 / 41, "heldout17": 39.0 / 40, "heldout18": 45.0 / 50, "heldout19": 0}

// unseenSplits is the order the splits are scored and reported in.
var unseenSplits = []string{"dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "dev6", "heldout6", "heldout7", "heldout8", "heldout9", "heldout10", "heldout11", "heldout12", "heldout13", "heldout14", "heldout15", "heldout16", "heldout17", "heldout18", "heldout19"}

// unseenBlind names the splits whose misses are counted but not listed.
var unseenBlind = map[string]bool{"heldout19": true}

type unseenSample struct {
	name, expect, text string
}

func loadUnseen(t testing.TB, split string) []unseenSample {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "unseen", split, "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples in testdata/unseen/%s: %v", split, err)
	}
	sort.Strings(paths)
	var out []unseenSample
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.SplitN(string(b), "\n", 4)
		if len(parts) < 4 || !strings.HasPrefix(parts[0], "source: https://") || !strings.HasPrefix(parts[1], "expect: ") || parts[2] != "" {
			t.Fatalf("%s: not a sample with the 3-line header (source: URL, expect: KIND, blank)", p)
		}
		out = append(out, unseenSample{name: filepath.Base(p), expect: strings.TrimSpace(strings.TrimPrefix(parts[1], "expect: ")), text: parts[3]})
	}
	return out
}

// unseenVerdict is what `kcrash triage FILE` concludes from the text alone
// (no exit status known).
func unseenVerdict(t *testing.T, s unseenSample) evidence.Kind {
	t.Helper()
	fs, err := ScanEvidenceText(bytes.NewReader([]byte(s.text)), s.name, 2025)
	if err != nil {
		t.Fatal(err)
	}
	return Decide(Input{Findings: fs}).Verdict.Kind
}

func TestUnseenAccuracy(t *testing.T) {
	for _, split := range unseenSplits {
		samples := loadUnseen(t, split)
		right := 0
		for _, s := range samples {
			got := unseenVerdict(t, s)
			if string(got) == s.expect {
				right++
			} else if !unseenBlind[split] {
				t.Logf("%s miss: %s: got %s, want %s", split, s.name, got, s.expect)
			}
		}
		acc := float64(right) / float64(len(samples))
		t.Logf("%s: %d of %d right (%.0f %%)", split, right, len(samples), 100*acc)
		if acc < unseenFloor[split] {
			t.Errorf("%s accuracy %.2f under the floor %.2f", split, acc, unseenFloor[split])
		}
	}
}
