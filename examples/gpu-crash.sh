#!/bin/sh
# A stand-in for an SGLang server dying of a GPU fault, for machines without a
# GPU: it writes an SGLang-format kernel-API log (level 3) to wherever
# SGLANG_KERNEL_API_LOGDEST points (kcrash's sglang profile sets it), prints
# the HIP illegal-address error PyTorch prints on ROCm, and aborts the way
# the ROCr runtime does.
#
#   kcrash run -- sh examples/gpu-crash.sh
set -u
dest=${SGLANG_KERNEL_API_LOGDEST:-stdout}
pid=$$
case $dest in
stdout) log=/dev/stdout ;;
stderr) log=/dev/stderr ;;
*) log=$(printf '%s' "$dest" | sed "s/%i/$pid/g") ;;
esac
now() { date '+%Y-%m-%d %H:%M:%S'; }
sep='================================================================================'

call() { # api M
	printf '%s\n[%s] SGLang Kernel API Call: %s\n' "$sep" "$(now)" "$1"
	printf 'Positional input arguments:\n  arg[0]=Tensor(\n      shape=(%s, 4096)\n      dtype=torch.bfloat16\n      device=cuda:0\n      requires_grad=False\n      is_contiguous=True\n    )\n' "$2"
}
output() { # M
	printf 'Output:\n  return=Tensor(\n      shape=(%s, 6144)\n      dtype=torch.bfloat16\n      device=cuda:0\n      requires_grad=False\n      is_contiguous=True\n    )\n' "$1"
}

echo "[$(now)] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=171.12 GB"
echo "[$(now)] The server is fired up and ready to roll!"
{
	for i in 1 2 3; do
		call sglang.quant_method.Fp8LinearMethod.apply 1
		output 1
	done
	# the next prefill chunk enters with M=288 and never returns
	call sglang.quant_method.Fp8LinearMethod.apply 288
} >>"$log"
echo "[$(now)] Prefill batch. #new-seq: 1, #new-token: 288, #cached-token: 0"
cat >&2 <<'ERR'
[rank0]: Traceback (most recent call last):
[rank0]:   File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2617, in run_scheduler_process
[rank0]:     scheduler.event_loop_overlap()
[rank0]: torch.AcceleratorError: HIP error: an illegal memory access was encountered
[rank0]: HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
[rank0]: For debugging consider passing AMD_SERIALIZE_KERNEL=3
[rank0]: Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.
Memory access fault by GPU node-2 (Agent handle: 0x55d5e0b0a2c0) on address 0x7f2a3c000000. Reason: Page not present or supervisor privilege.
ERR
kill -ABRT $pid
