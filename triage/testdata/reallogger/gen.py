"""Writes the kernel-API logs of triage's real-logger tests with FlashInfer's
own logger: flashinfer/api_logging.py of github.com/flashinfer-ai/flashinfer
at commit fb28d7242b3506a2348265962041acc1fb56cca4, loaded unchanged from
API_LOGGING (a path to that file). Run with a CPU torch:

    API_LOGGING=/path/to/api_logging.py python3 gen.py OUTDIR

level1/: two workers log at FLASHINFER_LOGLEVEL=1 into per-pid files
(FLASHINFER_LOGDEST=.../flashinfer_%i.log). One dies of a real SIGSEGV after
its calls; the other goes on calling for a second more and exits 0, so its
lines are the newest. run.json records the pids and how each ended, as the
parent's waitpid saw it.
level5/: one process at level 5 passes an object (an nn.Linear-like class)
as an argument, and rmsnorm, given zeros and eps=0, returns NaN from finite inputs; it exits 0.
"""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time


def load_logger():
    import torch
    # torch before 2.1 has no float8 dtypes, which the logger's level-5
    # statistics list; stand-ins keep that list valid without changing what
    # it prints for float32 tensors.
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, object())
    spec = importlib.util.spec_from_file_location("api_logging", os.environ["API_LOGGING"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, torch


def worker(role):
    fi, torch = load_logger()

    class Linear:
        pass

    @fi.flashinfer_api
    def mm_fp8(a, b):
        return a @ b

    @fi.flashinfer_api
    def rmsnorm(x, weight, eps=1e-6):
        return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * weight

    @fi.flashinfer_api
    def apply(layer, x):
        return x * 2

    x = torch.ones(4, 8)
    if role == "crash":
        for _ in range(3):
            rmsnorm(x, torch.ones(8))
            mm_fp8(x, torch.ones(8, 4))
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    elif role == "ok":
        sys.stdin.read()  # the parent closes it once the crashing worker is dead
        time.sleep(1.1)   # the logger's timestamps have 1 s resolution
        for _ in range(3):
            apply(Linear(), x)
    elif role == "nan":
        apply(Linear(), x)
        rmsnorm(x * 0, torch.ones(8), eps=0.0)  # 0 / 0: the return is NaN, the inputs are not


def main(out):
    here = os.path.abspath(__file__)
    l1 = os.path.join(out, "level1")
    os.makedirs(l1, exist_ok=True)
    env = dict(os.environ, FLASHINFER_LOGLEVEL="1", FLASHINFER_LOGDEST=os.path.join(l1, "flashinfer_%i.log"))
    ok = subprocess.Popen([sys.executable, here, "--worker", "ok"], env=env, stdin=subprocess.PIPE)
    crash = subprocess.Popen([sys.executable, here, "--worker", "crash"], env=env)
    crash_rc = crash.wait()
    ok.stdin.close()
    ok_rc = ok.wait()
    with open(os.path.join(l1, "run.json"), "w") as f:
        json.dump({"crashed": {"pid": crash.pid, "returncode": crash_rc},
                   "normal": {"pid": ok.pid, "returncode": ok_rc}}, f, indent=1)
        f.write("\n")
    l5 = os.path.join(out, "level5")
    os.makedirs(l5, exist_ok=True)
    env = dict(os.environ, FLASHINFER_LOGLEVEL="5", FLASHINFER_LOGDEST=os.path.join(l5, "flashinfer.log"))
    nan = subprocess.run([sys.executable, here, "--worker", "nan"], env=env)
    with open(os.path.join(l5, "run.json"), "w") as f:
        json.dump({"pid": None, "returncode": nan.returncode}, f)
        f.write("\n")


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        main(sys.argv[1])
