"""GPU training throughput (issue 23): a Task 1 epoch alone, packed runs, peak GPU memory, model FLOP utilisation.

On CUDA at the `paper` preset (on CPU at the `repro` preset, same columns), into scratch stores, in this process:

  - solo: one run alone for `--epochs` epochs (default 2; the last epoch is reported, so CUDA start-up and
    autotuning stay out): seconds of training per epoch (`epoch_time_s`) and per epoch with its evaluation;
  - packed K (`--ks`, default 1,3,6,12 on CUDA, 1,3 on CPU): K seeds trained as one pack (`train_packed`):
    aggregate run-epochs per second, and the ratio to K solo runs one after another (K x the solo epoch's wall
    time / the pack's); packing needs dropout 0, so where the preset has dropout the packed rows and their solo
    reference are measured with `model.dropout=0` (said in the output);
  - peak GPU memory per run (run.json `peak_gpu_mb`; a pack's peak / K) against `estimate_gpu_memory`;
  - MFU: the epoch's model FLOPs (6 x parameters x computed tokens + the attention's 12 x layers x d_model x
    seq_len^2 per sequence, fwd + bwd) / the measured training time / the device's dense bf16 peak
    (`--peak-tflops`, default from the device name: H100 / H200 989, A100 312; none on CPU).

    python benchmarks/bench_gpu.py [--device cuda] [--preset paper] [--ks 1,3,6,12] [--epochs 2]
                                   [--set task.n_examples=3000] [--threads 2]

Prints a markdown table (the one in docs/training.md) and writes it as JSON with `--json PATH`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from workbench.store import RunStore  # noqa: E402
from workbench.train import resolve_config, train  # noqa: E402
from workbench.train.packed import train_packed  # noqa: E402
from workbench.train.presets import estimate_gpu_memory, task_spec  # noqa: E402

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def epoch_flops(cfg: dict) -> float:
    """Model FLOPs of one training epoch on random (padded) batches: 6 x parameters x computed tokens (fwd + bwd
    matmuls) + attention scores and values, 12 x layers x d_model x seq_len^2 per sequence."""
    spec, m = task_spec(cfg["task"]), cfg["model"]
    n_train = round(spec.train_frac * spec.n_examples)
    d, ff, L = m["d_model"], m["d_ff"], m["n_layers"]
    params = L * (4 * d * d + 2 * d * ff) + d * m["n_classes"]  # the matmul weights (embeddings are lookups)
    return n_train * (6.0 * params * spec.seq_len + 12.0 * L * d * spec.seq_len ** 2)


def peak_tflops(dev: torch.device, given: float | None) -> float | None:
    if given:
        return given
    if dev.type != "cuda":
        return None
    name = torch.cuda.get_device_name(dev)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def last_epoch(run) -> dict:
    return run.metric_rows()[-1]


def measure(label: str, cfgs: list[dict], root: Path, data: Path, device: str, threads: int | None,
            peak: float | None) -> dict:
    """Train `cfgs` (one: solo; several: one pack) into a fresh store; the last epoch's figures."""
    store = RunStore(root / label, data_dir=data)
    cfgs = [resolve_config(store=store, **c) for c in cfgs]
    t0 = time.perf_counter()
    if len(cfgs) == 1:
        runs = [train(cfgs[0], store, device=device, threads=threads, progress=False)]
    else:
        runs = train_packed(cfgs, store, device=device, threads=threads, progress=False)
    total = time.perf_counter() - t0
    rows = [last_epoch(r) for r in runs]
    k = len(runs)
    train_s = rows[0]["epoch_time_s"]
    walls = [r.metric_rows() for r in runs]
    epoch_wall = walls[0][-1]["wall_s"] - (walls[0][-2]["wall_s"] if len(walls[0]) > 1 else 0.0)
    gpu = runs[0].info.get("peak_gpu_mb")
    flops = epoch_flops(cfgs[0]) * k
    return {"label": label, "k": k, "train_s_per_epoch": train_s, "wall_s_per_epoch": epoch_wall,
            "run_epochs_per_s": k / epoch_wall, "total_s": total,
            "peak_gpu_mb_per_run": None if gpu is None else gpu / k,
            "estimate_gpu_mb_per_run": estimate_gpu_memory(cfgs[0]) / 2**20,
            "mfu": None if peak is None else flops / train_s / (peak * 1e12),
            "test_acc": [r["test_acc"] for r in rows]}


def table_row(r: dict) -> str:
    gpu = "–" if r["peak_gpu_mb_per_run"] is None else \
        f"{r['peak_gpu_mb_per_run']:.0f} ({r['estimate_gpu_mb_per_run']:.0f})"
    mfu = "–" if r["mfu"] is None else f"{100 * r['mfu']:.1f} %"
    ratio = f"{r['ratio_vs_solo']:.2f}x" if "ratio_vs_solo" in r else "–"
    return (f"| {r['label']} | {r['k']} | {r['train_s_per_epoch']:.2f} | {r['wall_s_per_epoch']:.2f} | "
            f"{r['run_epochs_per_s']:.4f} | {ratio} | {gpu} | {mfu} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cuda = torch.cuda.is_available()
    ap.add_argument("--device", default="cuda" if cuda else "cpu")
    ap.add_argument("--preset", default=None, help="default: paper on CUDA, repro on CPU")
    ap.add_argument("--scheme", default="rope")
    ap.add_argument("--ks", default=None, help="pack sizes, default 1,3,6,12 on CUDA, 1,3 on CPU")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="override for every run")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    dev = torch.device(a.device)
    preset = a.preset or ("paper" if dev.type == "cuda" else "repro")
    ks = [int(k) for k in (a.ks or ("1,3,6,12" if dev.type == "cuda" else "1,3")).split(",")]
    base = {"preset": preset, "scheme": a.scheme, "task": "trigger-distance",
            "sets": [f"train.epochs={a.epochs}", *a.sets]}
    dropout = resolve_config(**base)["model"]["dropout"]
    pack_sets = base["sets"] + (["model.dropout=0"] if dropout > 0 else [])
    peak = peak_tflops(dev, a.peak_tflops)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"device: {name}; preset {preset}, scheme {a.scheme}, Task 1, last of {a.epochs} epochs"
          + (f"; packed rows and their reference at model.dropout=0 (preset: {dropout})" if dropout > 0 else ""))
    print("| measurement | K | train s / epoch | wall s / epoch (with eval) | run-epochs / s | vs K solo | "
          "peak GPU MiB / run (estimate) | MFU |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    results = []

    def done(r: dict) -> None:
        """Print the row and rewrite the JSON as each measurement ends, so a run cut short keeps its rows."""
        results.append(r)
        print(table_row(r), flush=True)
        if a.json:
            a.json.write_text(json.dumps({"device": name, "preset": preset, "results": results}, indent=1))

    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp), Path(tmp) / "data"
        done(measure("solo", [base], root, data, a.device, a.threads, peak))
        ref = results[0]
        if dropout > 0:
            ref = measure("solo-dropout0", [base | {"sets": pack_sets}], root, data, a.device, a.threads, peak)
            done(ref)
        for k in ks:
            cfgs = [base | {"sets": pack_sets, "seed": 42 + i} for i in range(k)]
            if k == 1:
                continue  # K = 1 is the solo run (train_packed needs 2 or more to differ from it)
            r = measure(f"packed-{k}", cfgs, root, data, a.device, a.threads, peak)
            r["ratio_vs_solo"] = k * ref["wall_s_per_epoch"] / r["wall_s_per_epoch"]
            done(r)


if __name__ == "__main__":
    main()
