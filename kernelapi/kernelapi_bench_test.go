package kernelapi

import (
	"bytes"
	"sync"
	"testing"

	"github.com/kcrash/kcrash/internal/kapigen"
)

var (
	benchKAOnce sync.Once
	benchKALog  []byte
)

// benchKA is a 64 MiB level-3 log from the same generator as
// bench/kernelapi.sh, built once and kept in memory so that the benchmark
// measures parsing, not the disk.
func benchKA(b *testing.B) []byte {
	benchKAOnce.Do(func() {
		var buf bytes.Buffer
		buf.Grow(65 << 20)
		if _, err := kapigen.Write(&buf, kapigen.Options{Size: 64 << 20, Seed: 1, Layers: 32}); err != nil {
			b.Fatal(err)
		}
		benchKALog = buf.Bytes()
	})
	return benchKALog
}

func BenchmarkAnalyze(b *testing.B) {
	data := benchKA(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := AnalyzeReaders([]NamedReader{{Name: "kapi_4242.log", Reader: bytes.NewReader(data)}})
		if err != nil {
			b.Fatal(err)
		}
		if r.UnfinishedCall == nil {
			b.Fatal("no unfinished call")
		}
	}
}

// BenchmarkAnalyzePerPid splits the same bytes over four files, as
// four TP workers would write them, to price the merge.
func BenchmarkAnalyzePerPid(b *testing.B) {
	data := benchKA(b)
	var parts [4][]byte
	sep := []byte("\n================================================================================\n")
	rest := data
	for i := range parts {
		if i == len(parts)-1 {
			parts[i] = rest
			break
		}
		cut := bytes.Index(rest[len(data)/4:], sep)
		if cut < 0 {
			b.Fatal("no separator")
		}
		cut += len(data)/4 + 1
		parts[i], rest = rest[:cut], rest[cut:]
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		in := make([]NamedReader, len(parts))
		for i, p := range parts {
			in[i] = NamedReader{Name: "kapi_" + string(rune('1'+i)) + ".log", Reader: bytes.NewReader(p)}
		}
		if _, err := AnalyzeReaders(in); err != nil {
			b.Fatal(err)
		}
	}
}
