package bucket

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/fleettest"
	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/fleet/source"
	"github.com/kcrash/kcrash/internal/testcorpus"
)

func walk(t *testing.T, dir string) []index.Summary {
	t.Helper()
	var got []index.Summary
	if _, err := (source.Walk{Put: func(s []index.Summary) error { got = append(got, s...); return nil }}).Run(context.Background(), []string{dir}); err != nil {
		t.Fatal(err)
	}
	return got
}

// A small fleet with one of each: a GPU that faults under three different
// signatures (hardware), one bug on four hosts after an upgrade (software,
// naming the upgrade), a GPU that fell off the bus (hardware by its record),
// and a lone device assert (undetermined). Counts, first/last seen and "new"
// follow the window.
func TestGroupClasses(t *testing.T) {
	corpus := testcorpus.Dir(t)
	log := func(rel string) string { return fleettest.Corpus(t, corpus, rel) }
	xid13 := log("3-nvidia-xid/xid13-xid109-pt_main_thread-dmesg-ctime.txt")
	xid31 := log("3-nvidia-xid/xid31-mmu-fault-then-xid62-xid45-cascade.txt")
	xid31 = xid31[:strings.Index(xid31, "Xid (PCI:0000:0a:00): 62")]
	xid31 = xid31[:strings.LastIndex(xid31, "\n")+1]
	xid119 := log("3-nvidia-xid/xid119-gsp-rpc-timeout-h100-full-dump.txt")
	hip := log("2-rocm-userspace-fault/torch-acceleratorerror-hip-illegal-address.txt")
	bus := log("3-nvidia-xid/xid79-modal-gpu-health-wrapped.txt")
	assert := log("6-program-log/device-side-assert-kernel-assertion-lines-indexkernel.txt")

	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	old := map[string]string{"torch": "2.9.1", "sglang": "0.5.2", "nvidia-driver": "570.158.01"}
	upgraded := map[string]string{"torch": "2.9.1", "sglang": "0.5.3", "nvidia-driver": "570.158.01"}
	seed := uint64(0)
	w := func(host string, ago time.Duration, text, busID, uuid string, stack map[string]string, localRank int) {
		seed++
		fleettest.Write(t, fleettest.Spec{Out: dir, Host: host, Time: now.Add(-ago), Job: "j" + host, Rank: localRank, LocalRank: localRank,
			Log: text, BusID: busID, UUID: uuid, Stack: stack, Seed: seed})
	}
	bad := "GPU-badbadba-0000-0000-0000-000000000001"
	w("h1", 70*time.Hour, xid13, "0000:9b:00.0", bad, old, 0)
	w("h1", 30*time.Hour, xid31, "0000:9b:00.0", bad, upgraded, 0)
	w("h1", 2*time.Hour, xid119, "0000:9b:00.0", bad, upgraded, 0)
	for i, h := range []string{"h2", "h3", "h4", "h5"} {
		w(h, time.Duration(20-i)*time.Hour, hip, "", "", upgraded, i)
	}
	w("h2", 10*24*time.Hour, hip, "", "", upgraded, 0) // before the window: counts in total and first seen only
	w("h6", 5*time.Hour, xid13, "0000:3b:00.0", "GPU-00000000-0000-0000-0000-000000000006", old, 0)
	w("h9", time.Hour, bus, "0000:c6:00.0", "GPU-99999999-0000-0000-0000-000000000009", old, 0)
	w("h7", 3*time.Hour, assert, "", "", old, 2)

	rep := Group(walk(t, dir), Options{Now: now})
	if rep.Bundles != 11 || rep.K != DefaultK || rep.Window != "7d" {
		t.Fatalf("report header %+v", rep)
	}
	find := func(sub string) Bucket {
		t.Helper()
		var hit []Bucket
		for _, b := range rep.Buckets {
			if strings.Contains(b.Title, sub) {
				hit = append(hit, b)
			}
		}
		if len(hit) != 1 {
			t.Fatalf("%d buckets titled %q: %+v", len(hit), sub, rep.Buckets)
		}
		return hit[0]
	}
	soft := find("hipErrorIllegalAddress")
	if soft.Class != Software || soft.Component != "sglang=0.5.3" || soft.Count != 4 || soft.Total != 5 || soft.New ||
		len(soft.Hosts) != 4 || !soft.FirstSeen.Equal(now.Add(-10*24*time.Hour)) || !soft.LastSeen.Equal(now.Add(-17*time.Hour)) {
		t.Errorf("software bug: %+v", soft)
	}
	if fell := find("gpu-fell-off-bus"); fell.Class != Hardware || !fell.New || fell.Count != 1 || fell.GPUs[0] != "h9/0000:c6:00.0" {
		t.Errorf("fell off the bus: %+v", fell)
	}
	if gsp := find("Xid 119"); gsp.Class != Hardware || !strings.Contains(gsp.Reason, "1 of 1 faults on hardware-suspect GPUs") {
		t.Errorf("Xid 119 on the bad GPU: %+v", gsp)
	}
	// Xid 13 on the bad GPU and on a healthy one: two GPUs, two hosts, below
	// m; half its faults are on the bad GPU, not most: undetermined.
	if x13 := find("Xid 13"); x13.Class != Undetermined || x13.Count != 2 || x13.Counts.HardwareGPUs != 1 {
		t.Errorf("Xid 13: %+v", x13)
	}
	if lone := find("gpu_device_assert"); lone.Class != Undetermined || lone.Counts.Members != 1 || lone.Counts.CoarseHosts != 1 {
		t.Errorf("lone assert: %+v", lone)
	}
	gpu := map[string]GPU{}
	for _, g := range rep.GPUs {
		gpu[g.ID] = g
	}
	if g := gpu[bad]; g.Class != Hardware || g.Faults != 3 || g.Coarse != 3 || g.Stacks != 2 || g.Host != "h1" || len(g.Buckets) != 3 {
		t.Errorf("bad GPU: %+v", g)
	}
	if g := gpu["h9/0000:c6:00.0"]; g.Class != Hardware || !strings.HasPrefix(g.Reason, "hardware record") {
		t.Errorf("fallen GPU: %+v", g)
	}
	if g := gpu["h3/local-rank-1"]; g.Class != Software || !g.Guessed {
		t.Errorf("a GPU whose only fault is the software bug: %+v", g)
	}
	if g := gpu["h6/0000:3b:00.0"]; g.Class != Undetermined || g.Faults != 1 {
		t.Errorf("healthy GPU with one Xid 13: %+v", g)
	}

	// Thresholds are options: with m = 5 the software bug's four GPUs are
	// not enough.
	if b := findIn(Group(walk(t, dir), Options{Now: now, M: 5}), "hipErrorIllegalAddress"); b.Class != Undetermined {
		t.Errorf("m=5: %+v", b)
	}
	// --since narrows what is listed and what is new.
	rep = Group(walk(t, dir), Options{Now: now, Since: now.Add(-90 * time.Minute)})
	if len(rep.Buckets) != 1 || !rep.Buckets[0].New || !strings.HasPrefix(rep.Buckets[0].Title, "gpu-fell-off-bus") {
		t.Errorf("since 90m: %d buckets: %s", len(rep.Buckets), titles(rep))
	}
}

func findIn(rep Report, sub string) Bucket {
	for _, b := range rep.Buckets {
		if strings.Contains(b.Title, sub) {
			return b
		}
	}
	return Bucket{}
}

func titles(rep Report) string {
	var out []string
	for _, b := range rep.Buckets {
		out = append(out, fmt.Sprintf("%s (%d)", b.Title, b.Count))
	}
	return strings.Join(out, "; ")
}
