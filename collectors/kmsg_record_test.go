package collectors

import (
	"context"
	"fmt"
	"github.com/kcrash/kcrash/internal/kmsg"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKmsgParseRecord(t *testing.T) {
	cases := []struct {
		in   string
		want kmsgRecord
	}{
		{"6,339,5140900,-;NET: Registered protocol family 10\n",
			kmsgRecord{Seq: 339, Mono: 5140900 * time.Microsecond, Level: 6, Facility: 0, Text: "NET: Registered protocol family 10"}},
		// Written from user space: facility user (1<<3 | err).
		{"11,420,574453534,-;amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:1 pasid:32769)\n",
			kmsgRecord{Seq: 420, Mono: 574453534 * time.Microsecond, Level: 3, Facility: 1, Text: "amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:40 vmid:1 pasid:32769)"}},
		// Later kernels append fields (caller id) after the flags.
		{"4,7,12,-,caller=T123;hello\n", kmsgRecord{Seq: 7, Mono: 12 * time.Microsecond, Level: 4, Text: "hello"}},
		// Dictionary lines of a driver message.
		{"3,800,9000000,-;amdgpu 0000:c6:00.0: amdgpu: ring gfx timeout\n SUBSYSTEM=pci\n DEVICE=+pci:0000:c6:00.0\n",
			kmsgRecord{Seq: 800, Mono: 9 * time.Second, Level: 3, Text: "amdgpu 0000:c6:00.0: amdgpu: ring gfx timeout", Dict: "SUBSYSTEM=pci\nDEVICE=+pci:0000:c6:00.0"}},
		// Tabs, newlines and UTF-8 are unescaped; ESC and backslash-forms stay readable and harmless.
		{`12,5,1,-;a\x09b\x0ac \xc3\xa9 \x1b[31m \x5c end` + "\n",
			kmsgRecord{Seq: 5, Mono: time.Microsecond, Level: 4, Facility: 1, Text: "a\tb\nc é \\x1b[31m \\ end"}},
		// A truncated escape is kept as it is.
		{`12,6,1,-;tail \x4`, kmsgRecord{Seq: 6, Mono: time.Microsecond, Level: 4, Facility: 1, Text: `tail \x4`}},
		{"12,7,1,c;continued fragment", kmsgRecord{Seq: 7, Mono: time.Microsecond, Level: 4, Facility: 1, Text: "continued fragment"}},
	}
	for _, c := range cases {
		got, err := kmsg.Parse([]byte(c.in))
		if err != nil {
			t.Errorf("parse %q: %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("parse %q:\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"", "hello", "6,1,2", "6,1,2,-", "x,1,2,-;t", "6,,2,-;t", "6;1;2;-;t", "6,1,-2,-;t"} {
		if _, err := kmsg.Parse([]byte(bad)); err == nil {
			t.Errorf("parse %q: want an error", bad)
		}
	}
}

// kmsgFakeDevice plays /dev/kmsg: one record per Read, errors where the
// script says, EAGAIN at the end.
type kmsgFakeDevice struct {
	script []any // string records or errors
}

func (d *kmsgFakeDevice) Read(p []byte) (int, error) {
	if len(d.script) == 0 {
		return 0, syscall.EAGAIN
	}
	next := d.script[0]
	d.script = d.script[1:]
	switch v := next.(type) {
	case error:
		return 0, v
	case string:
		if len(v) > len(p) {
			return 0, syscall.EINVAL
		}
		return copy(p, v), nil
	}
	panic("bad script")
}

func kmsgRec(seq int, sec float64, text string) string {
	return fmt.Sprintf("12,%d,%d,-;%s\n", seq, int64(sec*1e6), text)
}

// The kernel overwrites the records under a slow reader: read(2) fails with
// EPIPE, wrapped by os.File in a *PathError (the form euank v2 misses), and
// the next read returns the oldest record left. The reader goes on and the
// jump in sequence numbers becomes a gap line.
func TestKmsgReaderSurvivesEPIPE(t *testing.T) {
	b := newKmsgBuffer()
	b.setWindow(100 * time.Second)
	dev := &kmsgFakeDevice{script: []any{
		kmsgRec(10, 50, "before the window"),
		&os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EPIPE},
		kmsgRec(15, 90, "still before the window, after a gap that lost nothing of the run"),
		kmsgRec(16, 101, "first of the run"),
		kmsgRec(17, 102, "second"),
		&os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EPIPE},
		syscall.EPIPE,
		kmsgRec(40, 110, "after the overwrite"),
		"garbage without a header",
		kmsgRec(41, 111, "last"),
	}}
	malformed := 0
	err := kmsg.Read(context.Background(), dev, make([]byte, kmsg.ReadBuf), b.add, func() { malformed++ })
	if err != nil {
		t.Fatalf("readKmsg: %v", err)
	}
	if malformed != 1 {
		t.Errorf("malformed = %d, want 1", malformed)
	}
	if b.older != 2 {
		t.Errorf("older = %d, want 2", b.older)
	}
	if len(b.gaps) != 1 || b.gaps[0] != (kmsgGap{From: 18, To: 39}) || b.lost != 22 {
		t.Fatalf("gaps = %v lost %d, want one gap 18..39 (22)", b.gaps, b.lost)
	}
	text, _, _ := renderKmsg(kmsgNotes(b, time.Unix(0, 0), time.Unix(100, 0)), kmsgLines(b, time.Unix(0, 0)))
	got := string(text)
	for _, want := range []string{
		"kcrash: lost 22 records in 1 gaps",
		"second\nkcrash: lost 22 records (seq 18..39)\n1970-01-01T00:01:50.000000Z user  :warn  : after the overwrite\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("kmsg.log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "before the window") {
		t.Errorf("kmsg.log holds records before the window:\n%s", got)
	}

	// Any other error ends the read and is returned (the watcher reopens).
	dev = &kmsgFakeDevice{script: []any{kmsgRec(42, 112, "x"), syscall.EIO}}
	if err := kmsg.Read(context.Background(), dev, make([]byte, kmsg.ReadBuf), b.add, func() {}); err != syscall.EIO {
		t.Errorf("readKmsg on EIO = %v", err)
	}
	// io.EOF (a device that is not the ring) ends the read and says so.
	if err := kmsg.Read(context.Background(), kmsgEOF{}, nil, b.add, func() {}); err != io.EOF {
		t.Errorf("readKmsg on EOF = %v", err)
	}
}

type kmsgEOF struct{}

func (kmsgEOF) Read([]byte) (int, error) { return 0, io.EOF }

// A record already read through the other descriptor (the watcher's, then
// the collector's) is not added twice, and the reopen is no gap.
func TestKmsgBufferIdempotentAcrossDescriptors(t *testing.T) {
	b := newKmsgBuffer()
	for _, seq := range []int{1, 2, 3, 1, 2, 3, 4} {
		r, _ := kmsg.Parse([]byte(kmsgRec(seq, float64(seq), fmt.Sprint("r", seq))))
		b.add(r)
	}
	if n := len(b.live()); n != 4 || len(b.gaps) != 0 {
		t.Errorf("entries %d gaps %v, want 4 and none", n, b.gaps)
	}
}

func TestKmsgBufferRepeatsAndBound(t *testing.T) {
	b := newKmsgBuffer()
	b.maxRecords = 3
	seq := 0
	add := func(text string) {
		seq++
		r, _ := kmsg.Parse([]byte(kmsgRec(seq, float64(seq), text)))
		b.add(r)
	}
	add("a")
	add("b")
	add("b")
	add("b")
	add("c")
	add("b") // not consecutive: a line of its own
	live := b.live()
	if len(live) != 3 || b.dropped != 1 {
		t.Fatalf("live %d dropped %d, want 3 and 1 (the oldest, a)", len(live), b.dropped)
	}
	if live[0].rec.Text != "b" || live[0].count != 3 || live[0].lastMono != 4*time.Second {
		t.Errorf("folded entry = %+v, want b ×3 last at 4s", live[0])
	}
	if b.totalCount != 6 {
		t.Errorf("totalCount = %d, want 6", b.totalCount)
	}
	text, klines, counts := renderKmsg(kmsgNotes(b, time.Unix(0, 0), time.Time{}), kmsgLines(b, time.Unix(0, 0)))
	got := string(text)
	for _, want := range []string{"kcrash: dropped 1 older records", "user  :warn  : b (repeated 3 times)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("kmsg.log lacks %q:\n%s", want, got)
		}
	}
	// The parser sees the text without the count; the count is kept by line.
	if klines[0].Text != "b" || counts[klines[0].N] != 3 {
		t.Errorf("first line %+v count %d", klines[0], counts[klines[0].N])
	}
	lines := strings.Split(got, "\n")
	if lines[klines[0].N-1] != klines[0].Raw {
		t.Errorf("line %d of kmsg.log is %q, parser saw %q", klines[0].N, lines[klines[0].N-1], klines[0].Raw)
	}

	// The byte bound holds too: 100 records of 1 KiB in 32 KiB.
	b = newKmsgBuffer()
	b.maxBytes = 32 << 10
	for i := range 100 {
		r, _ := kmsg.Parse([]byte(kmsgRec(i+1, float64(i), fmt.Sprintf("%04d %s", i, strings.Repeat("x", 1024)))))
		b.add(r)
	}
	if b.bytes > b.maxBytes || b.dropped == 0 || b.dropped+len(b.live()) != 100 {
		t.Errorf("bytes %d dropped %d live %d", b.bytes, b.dropped, len(b.live()))
	}
}

// kmsgBenchRecords is a mix of what a GPU node's ring holds: short kernel
// lines, amdgpu fault dumps with tabs, NVRM Xid lines, records with
// dictionaries.
var kmsgBenchRecords = []string{
	"6,339,5140900,-;NET: Registered protocol family 10\n",
	"3,1201,4778915423,-;amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)\n SUBSYSTEM=pci\n DEVICE=+pci:0000:c6:00.0\n",
	`3,1202,4778917532,-;amdgpu 0000:c6:00.0: amdgpu: \x09 Faulty UTCL2 client ID: TCP (0x8)` + "\n SUBSYSTEM=pci\n DEVICE=+pci:0000:c6:00.0\n",
	"4,1300,14328198504,-;NVRM: Xid (PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, Ch 00000010, intr 00000000. MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x7f29_5b8c9000. Fault is of type FAULT_PRIV_VIOLATION ACCESS_TYPE_VIRT_READ\n",
	"6,1301,14372273528,-;sched: RT throttling activated\n",
	"3,1400,19277975559,-;Memory cgroup out of memory: Killed process 32550 (uvicorn) total-vm:1234567kB, anon-rss:654321kB, file-rss:1234kB, shmem-rss:0kB, UID:525287 pgtables:2048kB oom_score_adj:999\n",
}

// Target: ≥ 100 MB/s (go test ./collectors/ -run '^$' -bench KmsgParseRecord).
func BenchmarkKmsgParseRecord(b *testing.B) {
	recs := make([][]byte, len(kmsgBenchRecords))
	total := 0
	for i, s := range kmsgBenchRecords {
		recs[i] = []byte(s)
		total += len(s)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range recs {
			if _, err := kmsg.Parse(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// The watcher's whole path per record: read, parse, window check, fold,
// bound (go test ./collectors/ -run '^$' -bench KmsgRead).
func BenchmarkKmsgReadIntoBuffer(b *testing.B) {
	const n = 4096
	script := make([]any, n)
	total := 0
	for i := range script {
		r := kmsgBenchRecords[i%len(kmsgBenchRecords)]
		// Renumber so that every record is new to the buffer.
		rest := r[strings.IndexByte(r, ';'):]
		script[i] = fmt.Sprintf("6,%d,%d,-%s", i+1, 1000000+i, rest)
		total += len(script[i].(string))
	}
	buf := make([]byte, kmsg.ReadBuf)
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		kb := newKmsgBuffer()
		kb.setWindow(time.Second)
		dev := &kmsgFakeDevice{script: append([]any(nil), script...)}
		if err := kmsg.Read(context.Background(), dev, buf, kb.add, func() { b.Fatal("malformed") }); err != nil {
			b.Fatal(err)
		}
	}
}
