// Package kapigen generates synthetic SGLang kernel-API logs (level 3, the
// format of shared/reference/kernel-api-log.md §3) for benchmarks and memory
// tests: a decoder-only model's forward passes, decode batches and prefill
// chunks alternating, ending with a call that never returned.
//
// The output is a pure function of the options, and the Reader allocates
// nothing per record, so that it can feed the analyzer gigabytes while a test
// measures the analyzer's own allocations.
package kapigen

import (
	"io"
	"strconv"
)

// Options shape the log.
type Options struct {
	// Size is the number of bytes after which the log ends (the crash tail is
	// added past it, so the output is a few KiB longer).
	Size int64
	// Seed selects the batch-size sequence.
	Seed uint64
	// Layers per forward pass; 0 means 4 (real models have 24–80, which only
	// makes the log more repetitive).
	Layers int
	// Start is the first timestamp, "YYYY-MM-DD HH:MM:SS"; "" means 2026-05-02 14:00:00.
	Start string
	// CallsPerSecond advances the one-second timestamps; 0 means 2000.
	CallsPerSecond int
}

// Reader yields the log.
type Reader struct {
	o        Options
	buf      []byte
	off      int
	written  int64
	rng      uint64
	sec      int64 // seconds since Start
	base     [6]int
	calls    int
	layer    int
	step     int
	m        int // tokens in this forward pass
	prefill  bool
	bs       int
	done     bool
	tailDone bool
}

// NewReader returns a Reader for o.
func NewReader(o Options) *Reader {
	if o.Layers <= 0 {
		o.Layers = 4
	}
	if o.CallsPerSecond <= 0 {
		o.CallsPerSecond = 2000
	}
	if o.Start == "" {
		o.Start = "2026-05-02 14:00:00"
	}
	r := &Reader{o: o, rng: o.Seed*0x9E3779B97F4A7C15 + 1, bs: 1, buf: make([]byte, 0, 64<<10)}
	for i, p := range [6][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}} {
		r.base[i], _ = strconv.Atoi(o.Start[p[0]:p[1]])
	}
	r.newPass()
	return r
}

// Write writes a whole log to w.
func Write(w io.Writer, o Options) (int64, error) {
	return io.Copy(w, NewReader(o))
}

func (r *Reader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if r.off == len(r.buf) {
			if r.tailDone {
				break
			}
			r.buf, r.off = r.buf[:0], 0
			r.fill()
			continue
		}
		k := copy(p[n:], r.buf[r.off:])
		r.off += k
		n += k
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *Reader) rand(n int) int {
	// xorshift64*: deterministic, allocation-free.
	r.rng ^= r.rng >> 12
	r.rng ^= r.rng << 25
	r.rng ^= r.rng >> 27
	return int((r.rng * 2685821657736338717) >> 33 % uint64(n))
}

// newPass picks the next forward pass: mostly decode steps whose batch drifts
// by a request or two, now and then a prefill chunk.
func (r *Reader) newPass() {
	r.layer, r.step = 0, 0
	if r.rand(16) == 0 {
		r.prefill = true
		r.m = 16 + r.rand(8176)
		return
	}
	r.prefill = false
	r.bs += r.rand(5) - 2
	r.bs = max(1, min(r.bs, 256))
	r.m = r.bs
}

// fill appends at least one record to r.buf.
func (r *Reader) fill() {
	if r.done {
		r.tail()
		return
	}
	for len(r.buf) < 32<<10 {
		r.record()
		if r.written+int64(len(r.buf)) >= r.o.Size {
			r.done = true
			break
		}
	}
	r.written += int64(len(r.buf))
}

const hidden = 4096

var layerOps = [...]string{
	"RMSNorm.forward",
	"sglang.quant_method.UnquantizedLinearMethod.apply",
	"sglang.custom_op.fused_inplace_qknorm",
	"RotaryEmbedding.forward",
	"srt.layers.attention.flashinfer_backend.FlashInferAttnBackend.forward_",
	"sglang.quant_method.UnquantizedLinearMethod.apply",
	"RMSNorm.forward",
	"sglang.quant_method.Fp8LinearMethod.apply",
	"sglang.custom_op.silu_and_mul",
	"sglang.quant_method.Fp8LinearMethod.apply",
}

func (r *Reader) record() {
	op, suffix := layerOps[r.step], ""
	if r.step == 4 {
		suffix = "decode"
		if r.prefill {
			suffix = "extend"
		}
	}
	r.header(op, suffix)
	m := r.m
	switch r.step {
	case 0, 6: // RMSNorm with residual
		r.buf = append(r.buf, "Positional input arguments:\n"...)
		r.tensor("arg[0]", m, hidden, "torch.bfloat16")
		r.tensor("arg[1]", m, hidden, "torch.bfloat16")
		r.buf = append(r.buf, "Output:\n  return=(\n"...)
		r.item(0, m, hidden)
		r.item(1, m, hidden)
		r.buf = append(r.buf, "    )\n"...)
	case 1, 5, 7, 9: // linear layers
		out := [...]int{1: 6144, 5: hidden, 7: 28672, 9: hidden}[r.step]
		layer := [...]string{1: "QKVParallelLinear(in_features=4096, output_features=6144, bias=False, tp_size=1, gather_output=False)",
			5: "RowParallelLinear(in_features=4096, output_features=4096, bias=False, tp_size=1, reduce_results=True)",
			7: "MergedColumnParallelLinear(in_features=4096, output_features=28672, bias=False, tp_size=1, gather_output=False)",
			9: "RowParallelLinear(in_features=14336, output_features=4096, bias=False, tp_size=1, reduce_results=True)"}[r.step]
		in := hidden
		if r.step == 9 {
			in = 14336
		}
		r.buf = append(r.buf, "Positional input arguments:\n  arg[0]="...)
		r.buf = append(r.buf, layer[:indexByte(layer, '(')]...)
		r.buf = append(r.buf, "(\n      repr="...)
		r.buf = append(r.buf, layer...)
		r.buf = append(r.buf, "\n    )\n"...)
		r.tensor("arg[1]", m, in, "torch.bfloat16")
		r.buf = append(r.buf, "  arg[2]=None\nOutput:\n"...)
		r.tensor("return", m, out, "torch.bfloat16")
	case 2: // qk norm, in place
		r.buf = append(r.buf, "Positional input arguments:\n"...)
		r.tensor("arg[0]", m, 6144, "torch.bfloat16")
		r.buf = append(r.buf, "Keyword input arguments:\n  num_heads_q=32\n  num_heads_k=8\n  num_heads_v=8\n  head_dim=128\n  eps=1e-06\nOutput:\n  return=None\n"...)
	case 3: // rotary
		r.buf = append(r.buf, "Positional input arguments:\n"...)
		r.tensor1("arg[0]", m, "torch.int64")
		r.tensor("arg[1]", m, hidden, "torch.bfloat16")
		r.tensor("arg[2]", m, 1024, "torch.bfloat16")
		r.buf = append(r.buf, "Output:\n  return=(\n"...)
		r.item(0, m, hidden)
		r.item(1, m, 1024)
		r.buf = append(r.buf, "    )\n"...)
	case 4: // attention
		r.buf = append(r.buf, "Positional input arguments:\n"...)
		r.tensor("arg[0]", m, hidden, "torch.bfloat16")
		r.tensor("arg[1]", m, 1024, "torch.bfloat16")
		r.tensor("arg[2]", m, 1024, "torch.bfloat16")
		r.buf = append(r.buf, "  arg[3]=RadixAttention(\n      repr=RadixAttention(tp_q_head_num=32, tp_k_head_num=8, head_dim=128, layer_id="...)
		r.buf = strconv.AppendInt(r.buf, int64(r.layer), 10)
		r.buf = append(r.buf, ")\n    )\n  arg[4]=ForwardBatch(\n      repr=ForwardBatch(forward_mode=<ForwardMode."...)
		if r.prefill {
			r.buf = append(r.buf, "EXTEND: 1>, batch_size="...)
		} else {
			r.buf = append(r.buf, "DECODE: 2>, batch_size="...)
		}
		r.buf = strconv.AppendInt(r.buf, int64(r.bs), 10)
		r.buf = append(r.buf, ", ...)\n    )\nKeyword input arguments:\n  save_kv_cache=True\nOutput:\n"...)
		r.tensor("return", m, hidden, "torch.bfloat16")
	case 8: // activation
		r.buf = append(r.buf, "Positional input arguments:\n"...)
		r.tensor("arg[0]", m, 28672, "torch.bfloat16")
		r.buf = append(r.buf, "Output:\n"...)
		r.tensor("return", m, 14336, "torch.bfloat16")
	}
	r.step++
	if r.step == len(layerOps) {
		r.step = 0
		r.layer++
		if r.layer == r.o.Layers {
			r.newPass()
		}
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return len(s)
}

// tail is the crash: a prefill chunk enters a linear layer and the log ends
// before its Output.
func (r *Reader) tail() {
	r.header("sglang.quant_method.Fp8LinearMethod.apply", "")
	r.buf = append(r.buf, "Positional input arguments:\n  arg[0]=MergedColumnParallelLinear(\n      repr=MergedColumnParallelLinear(in_features=4096, output_features=28672, bias=False, tp_size=1, gather_output=False)\n    )\n"...)
	r.tensor("arg[1]", 288, hidden, "torch.bfloat16")
	r.buf = append(r.buf, "  arg[2]=None\n"...)
	r.tailDone = true
}

func (r *Reader) header(op, suffix string) {
	r.calls++
	if r.calls%r.o.CallsPerSecond == 0 {
		r.sec++
	}
	r.buf = append(r.buf, "================================================================================\n["...)
	r.ts()
	r.buf = append(r.buf, "] SGLang Kernel API Call: "...)
	r.buf = append(r.buf, op...)
	r.buf = append(r.buf, suffix...)
	r.buf = append(r.buf, '\n')
}

// ts writes Start+sec, carrying into minutes, hours and days (months are
// taken as 28 days, which keeps dates valid and is enough for a benchmark).
func (r *Reader) ts() {
	t := r.base
	s := int64(t[5]) + r.sec
	t[5] = int(s % 60)
	mi := int64(t[4]) + s/60
	t[4] = int(mi % 60)
	h := int64(t[3]) + mi/60
	t[3] = int(h % 24)
	d := int64(t[2]-1) + h/24
	t[2] = int(d%28) + 1
	mo := int64(t[1]-1) + d/28
	t[1] = int(mo%12) + 1
	t[0] += int(mo / 12)
	r.pad(t[0], 4)
	r.buf = append(r.buf, '-')
	r.pad(t[1], 2)
	r.buf = append(r.buf, '-')
	r.pad(t[2], 2)
	r.buf = append(r.buf, ' ')
	r.pad(t[3], 2)
	r.buf = append(r.buf, ':')
	r.pad(t[4], 2)
	r.buf = append(r.buf, ':')
	r.pad(t[5], 2)
}

func (r *Reader) pad(v, w int) {
	var d [8]byte
	for i := w - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	r.buf = append(r.buf, d[:w]...)
}

// tensor writes a top-level 2-D tensor argument the way _serialize_tensor and
// _log_section lay it out (fields at 6 spaces, closing paren at 4).
func (r *Reader) tensor(key string, m, n int, dtype string) {
	r.buf = append(r.buf, "  "...)
	r.buf = append(r.buf, key...)
	r.buf = append(r.buf, "=Tensor(\n      shape=("...)
	r.buf = strconv.AppendInt(r.buf, int64(m), 10)
	r.buf = append(r.buf, ", "...)
	r.buf = strconv.AppendInt(r.buf, int64(n), 10)
	r.buf = append(r.buf, ")\n      dtype="...)
	r.buf = append(r.buf, dtype...)
	r.buf = append(r.buf, "\n      device=cuda:0\n      requires_grad=False\n      is_contiguous=True\n    )\n"...)
}

func (r *Reader) tensor1(key string, m int, dtype string) {
	r.buf = append(r.buf, "  "...)
	r.buf = append(r.buf, key...)
	r.buf = append(r.buf, "=Tensor(\n      shape=("...)
	r.buf = strconv.AppendInt(r.buf, int64(m), 10)
	r.buf = append(r.buf, ",)\n      dtype="...)
	r.buf = append(r.buf, dtype...)
	r.buf = append(r.buf, "\n      device=cuda:0\n      requires_grad=False\n      is_contiguous=True\n    )\n"...)
}

// item writes a tensor inside a returned tuple (header at 6 spaces, fields at
// 12, closing paren at 10).
func (r *Reader) item(i, m, n int) {
	r.buf = append(r.buf, "      ["...)
	r.buf = strconv.AppendInt(r.buf, int64(i), 10)
	r.buf = append(r.buf, "] Tensor(\n            shape=("...)
	r.buf = strconv.AppendInt(r.buf, int64(m), 10)
	r.buf = append(r.buf, ", "...)
	r.buf = strconv.AppendInt(r.buf, int64(n), 10)
	r.buf = append(r.buf, ")\n            dtype=torch.bfloat16\n            device=cuda:0\n            requires_grad=False\n            is_contiguous=True\n          )\n"...)
}
