"""Where a training epoch's time goes, solo and packed (torch.profiler): the top ops by self CUDA and self CPU time.

One warm-up run, then one solo run and one pack of 3 seeds at `--preset` (default paper) on Task 1 with dropout 0,
1 epoch on `--examples` examples, into scratch stores. The profile behind docs/training.md's "GPU benchmark"
notes (cuDNN bf16 attention solo; fp32 memory-efficient attention in the pack before `packed_sdpa` cast it).

    python benchmarks/profile_gpu.py [--device cuda] [--preset paper] [--examples 8000] [--rows 18]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from workbench.store import RunStore  # noqa: E402
from workbench.train import resolve_config, train  # noqa: E402
from workbench.train.packed import train_packed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--examples", type=int, default=8000)
    ap.add_argument("--rows", type=int, default=18)
    a = ap.parse_args()
    sets = ["train.epochs=1", f"task.n_examples={a.examples}", "model.dropout=0"]
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device == "cuda" else [])
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"

        def configs(store, seeds):
            return [resolve_config(a.preset, "rope", "trigger-distance", seed=s, sets=sets, store=store)
                    for s in seeds]

        warm = RunStore(Path(tmp) / "warm", data_dir=data)
        train(configs(warm, [41])[0], warm, progress=False, device=a.device)
        for label, seeds in (("solo", [42]), ("pack of 3", [43, 44, 45])):
            store = RunStore(Path(tmp) / label.replace(" ", "_"), data_dir=data)
            with profile(activities=acts) as prof:
                t0 = time.perf_counter()
                if len(seeds) == 1:
                    train(configs(store, seeds)[0], store, progress=False, device=a.device)
                else:
                    train_packed(configs(store, seeds), store, progress=False, device=a.device)
                sync()
                print(f"{label}: {time.perf_counter() - t0:.2f} s wall", flush=True)
            table = prof.key_averages()
            for key in (["self_cuda_time_total"] if a.device == "cuda" else []) + ["self_cpu_time_total"]:
                print(f"{label}, by {key}")
                print(table.table(sort_by=key, row_limit=a.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
