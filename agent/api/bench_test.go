package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// floodAnswer is the agent's answer to a flood hour's query: the answer
// cap's 20,000 records, of a busy GPU node's kinds of lines.
func floodAnswer() []byte { return floodAnswerIn(false) }

// floodAnswerIn is floodAnswer in the compact form, or the full one.
func floodAnswerIn(compact bool) []byte {
	lines := []string{
		"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address",
		"amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770, for process python3 pid %d thread python3 pid %[1]d)",
		"audit: type=1400 audit(1733200000.123:%d): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"snap.lxd\"",
		"python3[%d]: segfault at 7f2a3c000000 ip 00007f2a4b1e2c3d sp 00007ffd5e6f7a80 error 4 in libcuda.so.550.54.15[7f2a4a000000+1a00000]",
		"usb 1-1.4: new high-speed USB device number %d using xhci_hcd",
	}
	k := KmsgResponse{BootID: "6c1a1b4e-7d2f-4a59-9a3e-0c6f1d2b3a4c", BootTime: time.Date(2026, 3, 1, 11, 0, 0, 123456789, time.UTC),
		Withheld: 16364, JournalStart: time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC), Notes: []string{"the window holds more records than one answer carries"}}
	for i := range 20_000 {
		r := Record{Seq: uint64(1<<40 + i), Mono: 3*24*time.Hour + time.Duration(i)*6*time.Millisecond, Level: 3,
			Text: fmt.Sprintf(lines[i%len(lines)], 10000+i%5000)}
		if i%len(lines) == 1 {
			r.Dict = "SUBSYSTEM=pci\nDEVICE=+pci:0000:c1:00.0"
		}
		k.Records = append(k.Records, r)
	}
	if compact {
		return compactOf(&k, true)
	}
	return k.AppendJSON(nil)
}

var forms = []struct {
	name    string
	compact bool
}{{"full", false}, {"compact", true}}

// cpuTime is the CPU this process has used, every thread (the GC's too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodeKmsgResponse is the client's reading of a flood hour's
// answer, once it holds its bytes.
func BenchmarkDecodeKmsgResponse(b *testing.B) {
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			body := floodAnswerIn(f.compact)
			b.SetBytes(int64(len(body)))
			cpu0 := cpuTime()
			for b.Loop() {
				k, err := DecodeKmsgResponse(body)
				if err != nil || len(k.Records) != 20_000 {
					b.Fatalf("%d records, %v", len(k.Records), err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkClientKmsg is a client's whole query of a flood hour but for
// the agent's side (answering in the full form, as an agent of before the
// compact form does, or the compact one): the connection over a real unix
// socket, the request, reading the answer off the socket, and decoding it. The server hands
// out the same bytes each time; its CPU is counted too (one process).
func BenchmarkClientKmsg(b *testing.B) {
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) { benchClientKmsg(b, floodAnswerIn(f.compact)) })
	}
}

func benchClientKmsg(b *testing.B, body []byte) {
	sock := filepath.Join(b.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	c := New(sock)
	b.SetBytes(int64(len(body)))
	cpu0 := cpuTime()
	for b.Loop() {
		k, err := c.Kmsg(context.Background(), KmsgQuery{Since: time.Now().Add(-time.Hour)})
		if err != nil || len(k.Records) != 20_000 {
			b.Fatalf("%d records, %v", len(k.Records), err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
