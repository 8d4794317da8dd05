"""Does holding MKL to AVX2 too re-make t1-alibi-repro-long-s42's shipped tables from its bit-identical re-training?"""
import os, sys
from workbench.analysis import reproduce as R
from workbench.store import RunStore
import torch
shipped, own = RunStore("results/repro", readonly=True), RunStore("runs-refresh")
rid = "t1-alibi-repro-long-s42-339848"
srun, rerun = shipped.get(rid), own.get(rid)
names = sys.argv[1].split(",")
print("ATEN", os.environ.get("ATEN_CPU_CAPABILITY"), "MKL", os.environ.get("MKL_ENABLE_INSTRUCTIONS"), torch.backends.cpu.get_cpu_capability(), flush=True)
tables, params, _ = R.recompute_tables(rerun, srun, names)
for n in names:
    a = R.table_agreement(srun.load_table(n), tables[n]); print(n, a["equal"], a["max_abs"], a["why"][:200], flush=True)
