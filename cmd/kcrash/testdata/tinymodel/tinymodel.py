"""A tiny decoder whose ops go through the kernel-API logger, for kcrash's tests.

gate_up has a batch-size bug: at M >= FAIL_M (env TINY_FAIL_M, default 256)
it fails the way TINY_FAIL_MODE says (abort: os.abort() inside the call, so
it never returns, like a GPU fault; raise: a RuntimeError; nan: NaN output).
The "aiter" code path (TINY_PATH=aiter) skips qk_norm, as a wrong
_use_aiter / _is_hip gate would.
"""
import os

import torch

from kapilog import debug_kernel_api

HIDDEN = 32
FAIL_M = int(os.environ.get("TINY_FAIL_M", "256"))
FAIL_MODE = os.environ.get("TINY_FAIL_MODE", "abort")


@debug_kernel_api
def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


@debug_kernel_api
def qkv_proj(x, w):
    return x @ w


@debug_kernel_api
def qk_norm(qkv):
    return qkv / (qkv.abs().amax(-1, keepdim=True) + 1e-6)


@debug_kernel_api
def gate_up(x, w):
    if x.shape[0] >= FAIL_M:
        if FAIL_MODE == "abort":
            os.abort()
        if FAIL_MODE == "raise":
            raise RuntimeError("gate_up: no kernel config for M=%d" % x.shape[0])
        return torch.full((x.shape[0], w.shape[1]), float("nan"), dtype=x.dtype)
    return x @ w


@debug_kernel_api
def down_proj(h, w):
    return torch.nn.functional.silu(h) @ w


class Model:
    def __init__(self, layers=2, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.layers = [
            dict(norm=torch.ones(HIDDEN), qkv=torch.randn(HIDDEN, 3 * HIDDEN, generator=g) / HIDDEN,
                 up=torch.randn(HIDDEN, 4 * HIDDEN, generator=g) / HIDDEN,
                 down=torch.randn(4 * HIDDEN, HIDDEN, generator=g) / HIDDEN)
            for _ in range(layers)
        ]

    def forward(self, x, path="default"):
        for l in self.layers:
            h = rms_norm(x, l["norm"])
            qkv = qkv_proj(h, l["qkv"])
            if path != "aiter":
                qkv = qk_norm(qkv)
            x = x + qkv[:, :HIDDEN]
            h = gate_up(rms_norm(x, l["norm"]), l["up"])
            x = x + down_proj(h, l["down"])
        if not torch.isfinite(x).all():
            raise FloatingPointError("non-finite hidden state after the last layer")
        return x
