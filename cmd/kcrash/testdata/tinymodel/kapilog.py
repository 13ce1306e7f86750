"""A stand-in for SGLang's kernel-API logger (debug_kernel_api), for kcrash's tests.

It writes what shared/reference/kernel-api-log.md documents for SGLang's
python/sglang/kernels/kernel_api_logging.py: the same environment variables,
one logging record per line, the call header, the argument sections and
tensor blocks (level 3), statistics (level 5), crash-safe dumps with
metadata.json rewritten in place (level 10), and the exception line. It is
written from that description, so that kcrash's tests exercise the real
format without SGLang and a GPU.
"""
import fnmatch
import functools
import inspect
import json
import logging
import os
import sys
from datetime import datetime
from pathlib import Path

import torch


def _with_pid(s):
    return s.replace("%i", str(os.getpid()))


def _env(name, conv, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return conv(raw)
    except Exception:
        return default


def _patterns(s):
    return [p.strip() for p in s.split(",") if p.strip()]


LEVEL = _env("SGLANG_KERNEL_API_LOGLEVEL", int, 0)
DEST = _env("SGLANG_KERNEL_API_LOGDEST", _with_pid, "stdout")
DUMP_DIR = Path(_env("SGLANG_KERNEL_API_DUMP_DIR", _with_pid, "sglang_kernel_api_dumps"))
INCLUDE = _env("SGLANG_KERNEL_API_DUMP_INCLUDE", _patterns, [])
EXCLUDE = _env("SGLANG_KERNEL_API_DUMP_EXCLUDE", _patterns, [])

log = logging.getLogger("sglang.kernel_api")
if LEVEL == 0:
    log.addHandler(logging.NullHandler())
    log.setLevel(logging.CRITICAL + 1)
else:
    log.setLevel(logging.DEBUG)
    if DEST == "stdout":
        h = logging.StreamHandler(sys.stdout)
    elif DEST == "stderr":
        h = logging.StreamHandler(sys.stderr)
    else:
        h = logging.FileHandler(DEST, mode="a")
    h.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(h)
    log.propagate = False

_calls = {}


def _ts():
    return datetime.now().strftime("[%Y-%m-%d %H:%M:%S]")


def _tensor_lines(t):
    out = ["Tensor(", "  shape=%s" % (tuple(t.shape),), "  dtype=%s" % t.dtype, "  device=%s" % t.device,
           "  requires_grad=%s" % t.requires_grad, "  is_contiguous=%s" % t.is_contiguous()]
    if LEVEL >= 5:
        if t.numel() == 0:
            out.append("  statistics=[empty tensor]")
        else:
            try:
                d = t.detach()
                f = d.float()
                nan = int(torch.isnan(d).sum().item()) if d.is_floating_point() else 0
                inf = int(torch.isinf(d).sum().item()) if d.is_floating_point() else 0
                out += ["  min=%.6f" % f.min().item(), "  max=%.6f" % f.max().item(), "  mean=%.6f" % f.mean().item(),
                        "  nan_count=%d" % nan, "  inf_count=%d" % inf]
            except Exception as exc:
                out.append("  statistics=[unavailable: %s]" % type(exc).__name__)
    out.append(")")
    return out


def _value_lines(v, depth=0):
    if depth >= 2:
        return ["%s(...)" % type(v).__name__]
    if isinstance(v, torch.Tensor):
        return _tensor_lines(v)
    if v is None or isinstance(v, (str, int, float, bool)):
        return [repr(v)]
    if isinstance(v, (list, tuple)):
        out = ["[" if isinstance(v, list) else "("]
        for i, item in enumerate(v[:4]):
            sub = _value_lines(item, depth + 1)
            out.append("  [%d] %s" % (i, sub[0]))
            out += ["      " + s for s in sub[1:]]
        if len(v) > 4:
            out.append("  ... (%d more items)" % (len(v) - 4))
        out.append("]" if isinstance(v, list) else ")")
        return out
    out = ["%s(" % type(v).__name__]
    for attr in ("shape", "dtype", "device"):
        if hasattr(v, attr):
            out.append("  %s=%s" % (attr, getattr(v, attr)))
    if len(out) == 1:
        out.append("  repr=%s" % repr(v)[:200])
    out.append(")")
    return out


def _section(title, items):
    log.debug(title)
    for k, v in items:
        lines = _value_lines(v)
        log.debug("  %s=%s", k, lines[0])
        for s in lines[1:]:
            log.debug("    %s", s)


def _json_value(v):
    if isinstance(v, torch.dtype):
        return {"type": "torch.dtype", "value": str(v)}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v[:16]]
    return {"type": type(v).__name__, "repr": repr(v)[:200]}


def _collect(prefix, v, tensors, meta):
    if isinstance(v, torch.Tensor):
        tensors[prefix] = v.detach().cpu()
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            _collect("%s_%d" % (prefix, i), x, tensors, meta)
        meta[prefix + "__container"] = {"type": type(v).__name__, "length": len(v)}
    else:
        meta[prefix] = _json_value(v)


def _write_meta(d, m):
    (d / "metadata.json").write_text(json.dumps(m, indent=2))


def _dump_inputs(name, args, kwargs):
    if INCLUDE and not any(fnmatch.fnmatch(name, p) for p in INCLUDE):
        return None
    if EXCLUDE and any(fnmatch.fnmatch(name, p) for p in EXCLUDE):
        return None
    DUMP_DIR.mkdir(parents=True, exist_ok=True)
    _calls[name] = _calls.get(name, 0) + 1
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S_%f")[:-3]
    d = DUMP_DIR / ("%s_pid%d_%s_call%04d" % (stamp, os.getpid(), name.replace("/", "_"), _calls[name]))
    d.mkdir(parents=True, exist_ok=True)
    tensors, meta = {}, {}
    for i, a in enumerate(args):
        _collect("arg_%d" % i, a, tensors, meta)
    for k, v in kwargs.items():
        _collect("kwarg_%s" % k, v, tensors, meta)
    if tensors:
        torch.save(tensors, d / "inputs.pt")
    _write_meta(d, {"function_name": name, "timestamp": stamp, "process_id": os.getpid(),
                    "execution_status": "inputs_saved", "input_metadata": meta,
                    "input_tensor_keys": list(tensors), "output_metadata": {}, "output_tensor_keys": []})
    log.debug("Dumped inputs to: %s", d)
    return d


def _dump_outputs(d, result):
    tensors, meta = {}, {}
    _collect("result", result, tensors, meta)
    if tensors:
        torch.save(tensors, d / "outputs.pt")
    m = json.loads((d / "metadata.json").read_text())
    m.update(execution_status="completed", output_metadata=meta, output_tensor_keys=list(tensors))
    _write_meta(d, m)
    log.debug("Dumped outputs to: %s", d)


def _name_of(f):
    mod = getattr(f, "__module__", "") or ""
    for p in ("sglang.", "sgl_kernel."):
        if mod.startswith(p):
            mod = mod[len(p):]
    qual = f.__qualname__.replace(".<locals>.", ".")
    if mod and mod not in ("__main__", "builtins"):
        return "%s.%s" % (mod, qual)
    return "%s.%s" % (Path(inspect.getsourcefile(f)).stem, qual)


def debug_kernel_api(f):
    if LEVEL == 0:
        return f
    name = _name_of(f)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        log.debug("=" * 80)
        log.debug("%s SGLang Kernel API Call: %s", _ts(), name)
        if LEVEL >= 3:
            if args:
                _section("Positional input arguments:", [("arg[%d]" % i, a) for i, a in enumerate(args)])
            if kwargs:
                _section("Keyword input arguments:", list(kwargs.items()))
        d = _dump_inputs(name, args, kwargs) if LEVEL >= 10 else None
        try:
            result = f(*args, **kwargs)
        except Exception as exc:
            if d is not None:
                m = json.loads((d / "metadata.json").read_text())
                m.update(execution_status="exception", exception={"type": type(exc).__name__, "message": str(exc)})
                _write_meta(d, m)
            log.debug("%s SGLang Kernel API Exception: %s (%s: %s)", _ts(), name, type(exc).__name__, exc)
            raise
        if d is not None:
            _dump_outputs(d, result)
        if LEVEL >= 3:
            _section("Output:", [("return", result)])
        return result

    wrapper._debug_kernel_wrapped = True
    return wrapper
