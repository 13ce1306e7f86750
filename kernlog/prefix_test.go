package kernlog

import (
	"testing"
	"time"
)

func TestSplitPrefix(t *testing.T) {
	const noTime, noMono = "", time.Duration(-1)
	cases := []struct {
		name, raw string
		year      int
		text      string
		time      string // RFC 3339 UTC, "" = nil
		mono      time.Duration
	}{
		{"dmesg", "[ 2480.727732] amdgpu 0000:0e:00.0: amdgpu: x", 0,
			"amdgpu 0000:0e:00.0: amdgpu: x", noTime, 2480727732 * time.Microsecond},
		{"dmesg big uptime", "[282248.294764] amdgpu: y", 0, "amdgpu: y", noTime, 282248294764 * time.Microsecond},
		{"dmesg newline", "[    1.000000] z\r\n", 0, "z", noTime, time.Second},
		{"dmesg -T", "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, x", 0,
			"NVRM: Xid (PCI:0000:9b:00): 119, x", "2025-02-23T16:24:18Z", noMono},
		{"dmesg -T padded day", "[Fri Aug  1 01:02:03 2026] a", 0, "a", "2026-08-01T01:02:03Z", noMono},
		{"markdown quoted dmesg -T", "> [Fri Aug 30 11:43:09 2024] NVRM: Xid x", 0, "NVRM: Xid x", "2024-08-30T11:43:09Z", noMono},
		{"dmesg -d", "[ 1843.308145 <    0.000012>] NVRM: a", 0, "NVRM: a", noTime, 1843308145 * time.Microsecond},
		{"dmesg delta", "[  +0.000012] NVRM: a", 0, "NVRM: a", noTime, noMono},
		{"dmesg -r", "<4>[   12.500000] oops", 0, "oops", noTime, 12500 * time.Millisecond},
		{"decode iso", "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: Xid (PCI:0000:38:00): 13, x", 0,
			"NVRM: Xid (PCI:0000:38:00): 13, x", "2025-01-21T04:41:44.283302Z", noMono},
		{"iso zone", "2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer: gfp_mask=0x6200ca", 0,
			"pool invoked oom-killer: gfp_mask=0x6200ca", "2024-04-29T12:55:41.678628Z", noMono},
		{"iso journal short-iso", "2024-05-01T12:00:00+0000 gpu-node-7 kernel: NVRM: a", 0, "NVRM: a", "2024-05-01T12:00:00Z", noMono},
		{"iso journal no host", "2024-05-01T12:00:00.5-0130 kernel: b", 0, "b", "2024-05-01T13:30:00.5Z", noMono},
		{"iso keeps message words", "2024-05-01T12:00:00Z amdgpu 0000:0e:00.0: amdgpu: x", 0,
			"amdgpu 0000:0e:00.0: amdgpu: x", "2024-05-01T12:00:00Z", noMono},
		{"iso then decode (kcrash kmsg.log)", "2026-12-02T10:15:00.123456Z kern  :err   : NVRM: Xid x", 0,
			"NVRM: Xid x", "2026-12-02T10:15:00.123456Z", noMono},
		{"cri", "2024-01-21T04:41:44.283302123Z stdout F NVRM: Xid x", 0, "NVRM: Xid x", "2024-01-21T04:41:44.283302123Z", noMono},
		// A journal pasted without host and tag keeps the driver's "NVRM:"
		// (heldout11's RTX 5070 Ti report): it is the message, not a tag.
		{"syslog no host, NVRM kept", "Sep 18 20:07:01 NVRM: Xid (PCI:0000:02:00): 109, pid=8494,   name=RenderThread, channel 0x0000000d, CTX SWITCH TIMEOUT, Info 0x14c011", 2026,
			"NVRM: Xid (PCI:0000:02:00): 109, pid=8494,   name=RenderThread, channel 0x0000000d, CTX SWITCH TIMEOUT, Info 0x14c011", "2026-09-18T20:07:01Z", noMono},
		{"syslog with uptime", "Dec  2 10:43:35 worker4 kernel: [240314.528856] NVRM: Xid x", 2024,
			"NVRM: Xid x", "2024-12-02T10:43:35Z", 240314528856 * time.Microsecond},
		{"syslog no host", "Mar 29 15:38:59 kernel: NVRM: Xid x", 2025, "NVRM: Xid x", "2025-03-29T15:38:59Z", noMono},
		{"journal two-digit day", "May 02 06:09:05 sidhakum-ubuntu kernel: traps: a[1] trap", 2025,
			"traps: a[1] trap", "2025-05-02T06:09:05Z", noMono},
		{"journal precise", "May 02 06:09:05.123456 host kernel: x", 2025, "x", "2025-05-02T06:09:05.123456Z", noMono},
		{"syslog other tag", "Oct  7 12:58:23 host ollama[812]: Memory access fault", 2023, "Memory access fault", "2023-10-07T12:58:23Z", noMono},
		{"syslog without year", "Oct  7 12:58:23 host kernel: x", 0, "x", noTime, noMono},
		{"kmsg", "6,1234,5678901,-;NVRM: Xid (PCI:0000:01:00): 79, x", 0, "NVRM: Xid (PCI:0000:01:00): 79, x", noTime, 5678901 * time.Microsecond},
		{"kmsg extra fields", "4,99,12,c,caller=T1;amdgpu: y", 0, "amdgpu: y", noTime, 12 * time.Microsecond},
		{"compose", "ollama  | Memory access fault by GPU node-1", 0, "Memory access fault by GPU node-1", noTime, noMono},
		{"backticks", "`traps: conky[3786] general protection ip:30e2c4ecc0`", 0, "traps: conky[3786] general protection ip:30e2c4ecc0", noTime, noMono},
		{"kubectl prefix", "[pod/gpu-0/app] [ 5.000001] x", 0, "x", noTime, 5000001 * time.Microsecond},
		{"continuation", "               NVRM: (PCI ID: 10de:26b5)", 0, "               NVRM: (PCI ID: 10de:26b5)", noTime, noMono},
		{"task table row is not a time", "[Fri Aug 21 22:26:52 2026] [  32415] 525287 32415", 0,
			"[  32415] 525287 32415", "2026-08-21T22:26:52Z", noMono},
		{"drm tag is not a prefix", "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring", 0, "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring", noTime, noMono},
		{"no prefix", "oom-kill:constraint=CONSTRAINT_NONE", 0, "oom-kill:constraint=CONSTRAINT_NONE", noTime, noMono},
		{"facility word not decode", "traps: x[1] y", 0, "traps: x[1] y", noTime, noMono},
		{"bad month", "Foo  7 12:58:23 host kernel: x", 2025, "Foo  7 12:58:23 host kernel: x", noTime, noMono},
		{"bad clock", "[Sun Feb 23 26:24:18 2025] x", 0, "[Sun Feb 23 26:24:18 2025] x", noTime, noMono},
		{"empty", "", 0, "", noTime, noMono},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := SplitPrefix(c.raw, 7, c.year)
			if l.N != 7 || l.Raw != c.raw {
				t.Errorf("N, Raw = %d, %q", l.N, l.Raw)
			}
			if l.Text != c.text {
				t.Errorf("Text = %q, want %q", l.Text, c.text)
			}
			gotTime := ""
			if l.Time != nil {
				gotTime = l.Time.Format(time.RFC3339Nano)
				if l.Time.Location() != time.UTC {
					t.Errorf("Time not in UTC: %v", l.Time)
				}
			}
			if gotTime != c.time {
				t.Errorf("Time = %q, want %q", gotTime, c.time)
			}
			gotMono := noMono
			if l.Mono != nil {
				gotMono = *l.Mono
			}
			if gotMono != c.mono {
				t.Errorf("Mono = %v, want %v", gotMono, c.mono)
			}
		})
	}
}

func TestNormBDF(t *testing.T) {
	for in, want := range map[string]string{
		"0000:9b:00":       "0000:9b:00.0",
		"00000000:9B:00.0": "0000:9b:00.0",
		"0003:00:00":       "0003:00:00.0",
		"0000:10:1c":       "0000:10:1c.0",
		"c1:00.0":          "0000:c1:00.0",
		"junk":             "junk",
	} {
		if got := normBDF(in); got != want {
			t.Errorf("normBDF(%q) = %q, want %q", in, got, want)
		}
	}
}
