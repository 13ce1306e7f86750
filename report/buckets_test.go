package report

import (
	"strings"
	"testing"
	"time"

	"github.com/kcrash/kcrash/fleet/bucket"
)

// Titles and hosts come from bundles that anyone may have written: the page
// shows them as text, loads nothing, runs nothing.
func TestBucketsPageEscapes(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	rep := &bucket.Report{Now: now, Since: now.Add(-7 * 24 * time.Hour), Window: "7d", K: 3, M: 3, N: 2, Bundles: 9,
		Buckets: []bucket.Bucket{
			{Signature: "0123456789abcdef", Title: `gpu_page_fault <script>alert(1)</script>`, Count: 5, New: true, Class: bucket.Software,
				Hosts: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, GPUs: []string{"<img src=x>"}, Reason: "on 5 GPUs", FirstSeen: now, LastSeen: now},
		},
		GPUs: []bucket.GPU{{ID: "GPU-1", Host: "node<1>", Class: bucket.Hardware, Faults: 4, Reason: "4 faults"}, {ID: "GPU-2", Class: bucket.Undetermined}},
	}
	page, err := BucketsPage(rep, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, bad := range []string{"<script>", "<img", "node<1>"} {
		if strings.Contains(s, bad) {
			t.Errorf("page holds %q unescaped", bad)
		}
	}
	for _, want := range []string{"default-src 'none'", "&lt;script&gt;alert(1)&lt;/script&gt;", "a, b, c, d, e, f and 2 more", "node&lt;1&gt;",
		"<td class=\"role\">software-suspect</td>", "Hardware-suspect GPUs", "9 bundles since 2026-11-26 00:00 UTC"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(s, "GPU-2") {
		t.Error("an undetermined GPU is listed among hardware-suspect ones")
	}
}
