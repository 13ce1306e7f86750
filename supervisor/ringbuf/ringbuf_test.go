package ringbuf

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestKeepsExactlyLastN(t *testing.T) {
	for _, size := range []int{1, 7, 64, 4096} {
		r := New(size)
		var all []byte
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for i := 0; i < 500; i++ {
			chunk := make([]byte, rng.IntN(3*size+1))
			for j := range chunk {
				chunk[j] = byte(rng.Uint32())
			}
			r.Write(chunk)
			all = append(all, chunk...)
			want := all
			if len(want) > size {
				want = want[len(want)-size:]
			}
			if got := r.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("size %d after %d writes: ring holds %d bytes, differs from the last %d written", size, i+1, len(got), len(want))
			}
		}
		if r.Total() != int64(len(all)) {
			t.Fatalf("Total = %d, want %d", r.Total(), len(all))
		}
	}
}

func TestEmptyAndPartial(t *testing.T) {
	r := New(10)
	if len(r.Bytes()) != 0 {
		t.Fatal("new ring not empty")
	}
	r.Write([]byte("abc"))
	if string(r.Bytes()) != "abc" {
		t.Fatalf("got %q", r.Bytes())
	}
	r.Write([]byte("defghijkl"))
	if string(r.Bytes()) != "cdefghijkl" {
		t.Fatalf("got %q", r.Bytes())
	}
}

// BenchmarkWrite measures the ring's write speed with the pump's chunk size
// (target: ≥ 5 GB/s).
func BenchmarkWrite(b *testing.B) {
	for _, chunk := range []int{4 << 10, 32 << 10} {
		b.Run(fmt.Sprintf("%dKiB", chunk>>10), func(b *testing.B) {
			r := New(16 << 20)
			p := bytes.Repeat([]byte("x"), chunk)
			b.SetBytes(int64(chunk))
			for b.Loop() {
				r.Write(p)
			}
		})
	}
}
