package report

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A line of any length keeps a bounded number of points, among them its
// first and last sample, its one spike and its one dip, in time order.
func TestDecimatorKeepsExtremes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{1, 7, 4096, 100_000, 1_000_003} {
		var d decimator
		spike, dip := n*2/3, n/3
		for i := range n {
			v := float64(i % 100)
			switch i {
			case spike:
				v = 1e9
			case dip:
				v = -1e9
			}
			d.add(point{t0.Add(time.Duration(i) * time.Second), v}, lineGroups)
		}
		pts, cut := d.points()
		if len(pts) > 8*lineGroups {
			t.Errorf("%d samples: %d points kept, want at most %d", n, len(pts), 8*lineGroups)
		}
		if cut != (len(pts) < n) {
			t.Errorf("%d samples: %d kept, reduced=%v", n, len(pts), cut)
		}
		if n <= 4096 && len(pts) != n {
			t.Errorf("%d samples: %d kept, want all (a few hours of samples are drawn whole)", n, len(pts))
		}
		has := func(i int) bool {
			for _, p := range pts {
				if p.t.Equal(t0.Add(time.Duration(i) * time.Second)) {
					return true
				}
			}
			return false
		}
		for _, i := range []int{0, n - 1, spike, dip} {
			if !has(i) {
				t.Errorf("%d samples: sample %d not kept", n, i)
			}
		}
		for i := 1; i < len(pts); i++ {
			if !pts[i].t.After(pts[i-1].t) {
				t.Fatalf("%d samples: points out of order at %d", n, i)
			}
		}
	}
}

// The lines of many GPUs share one bound.
func TestGPULanesShareTheBound(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"samples":[`)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 20000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"time":%q,"gpus":[`, t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
		for g := range 64 {
			if g > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"index":%d,"vram_used_bytes":%d}`, g, i*g)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	d := readGPUStream(strings.NewReader(b.String()))
	if d.err != nil {
		t.Fatal(d.err)
	}
	total := 0
	for _, k := range d.order {
		pts, _ := d.lanes[k].used.points()
		total += len(pts)
	}
	if len(d.order) != 64 || total > 8*allGroups {
		t.Errorf("%d lanes, %d points in all; want 64 lanes, at most %d points", len(d.order), total, 8*allGroups)
	}
}

// One value larger than the stream allows (give or take a read ahead) stops the file with a note,
// keeping what came before.
func TestStreamRefusesHugeValues(t *testing.T) {
	huge := `{"samples":[{"time":"2026-01-01T00:00:00Z","gpus":[{"index":0,"vram_used_bytes":1}]},{"time":"2026-01-01T00:00:01Z","gpus":[{"index":0,"name":"` + strings.Repeat("x", valueMax+256<<10) + `"}]}]}`
	d := readGPUStream(strings.NewReader(huge))
	if d.err == nil || !strings.Contains(d.err.Error(), "larger than") || d.samples != 1 {
		t.Errorf("err %v, %d samples; want a value too large after 1 sample", d.err, d.samples)
	}
}
