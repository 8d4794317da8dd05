"""Which held kernel closes the 1.07e-05 probes residue of t1-alibi-repro-long-s42's re-check (the shipped run was
trained and analysed on a Zen 3 EPYC at AVX2; this machine is a Zen 4 at AVX-512)? Re-makes its probes table from
the bit-identical re-training in runs-refresh/ (run from the refresh worktree) under the environment it was started
with, and prints the agreement with the shipped table and the kernels in use."""
import os
import time

import numpy as np
import torch
from threadpoolctl import threadpool_info

from workbench.analysis import reproduce as R
from workbench.store import RunStore

rid = "t1-alibi-repro-long-s42-339848"
srun, rerun = RunStore("results/repro", readonly=True).get(rid), RunStore("runs-refresh").get(rid)
feats = np._core._multiarray_umath.__cpu_features__
print({k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS",
                                      "NPY_DISABLE_CPU_FEATURES")},
      "aten", torch.backends.cpu.get_cpu_capability(), "numpy AVX512F", feats.get("AVX512F"),
      "openblas", [(i["architecture"], i["num_threads"]) for i in threadpool_info() if i["internal_api"] == "openblas"],
      flush=True)
t0 = time.time()
tables, _, _ = R.recompute_tables(rerun, srun, ["probes"])
a = R.table_agreement(srun.load_table("probes"), tables["probes"])
print("probes", a["equal"], a["max_abs"], a["why"][:200], f"{time.time() - t0:.0f} s", flush=True)
