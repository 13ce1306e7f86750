"""Run the tiny model over batches of the given sizes: run_model.py [PATH] M,M,..."""
import sys

import torch

from tinymodel import HIDDEN, Model

path = sys.argv[1] if len(sys.argv) > 1 else "default"
sizes = [int(m) for m in (sys.argv[2] if len(sys.argv) > 2 else "4,1,1,1").split(",")]
model = Model()
g = torch.Generator().manual_seed(1)
for m in sizes:
    out = model.forward(torch.randn(m, HIDDEN, generator=g), path)
    print("batch M=%d ok, out norm %.3f" % (m, out.norm().item()), flush=True)
print("done")
