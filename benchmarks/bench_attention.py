"""Where does SDPA beat the explicit attention path? Forward + backward of one PE-Lab attention layer (RoPE,
training mode, dropout 0, additive padding mask), SDPA vs explicit softmax(q k^T / sqrt(d) + mask) v, timed
interleaved in one process, best of `--repeats` rounds of `--steps` steps, over a grid of d_head x seq len.

    python benchmarks/bench_attention.py [--threads 1] [--batch 64] [--heads 8] [--device cpu]

Prints one line per shape with the ratio explicit time / SDPA time (> 1: SDPA is faster) and the smallest
d_head at which SDPA wins at every measured length: the crossover `Attention.fast_path_ok` gates on
(workbench/model/attention.py, `SDPA_MIN_D_HEAD`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.model import ModelConfig  # noqa: E402
from workbench.model.attention import MASK_VALUE, Attention  # noqa: E402


def _attention_of(cfg: ModelConfig) -> Attention:
    from workbench.model import PEClassifier

    return PEClassifier(cfg).blocks[0].attn


def step_time(attn: Attention, x: torch.Tensor, mask: torch.Tensor, steps: int, force: bool | None) -> float:
    sync = torch.cuda.synchronize if x.device.type == "cuda" else (lambda: None)
    gate = attn.fast_path_ok
    if force is not None:
        attn.fast_path_ok = lambda *_: force  # measure one path regardless of the gate
    try:
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            attn(x, x, mask).sum().backward()
        sync()
        return (time.perf_counter() - t0) / steps
    finally:
        attn.fast_path_ok = gate


def model_step(threads: int, repeats: int, steps: int) -> None:
    """The same comparison for a whole cpu-preset training step (RoPE, 4 layers, d 64, 8 heads, batch 64 of the
    real Task 1 data, forward + backward + AdamW), every layer forced onto one path."""
    import torch.nn.functional as F
    from synthetic_tasks import get_spec, load_or_generate
    from workbench.model import PEClassifier

    ds = load_or_generate(get_spec("trigger-distance", preset="cpu", seed=42))
    x, y = torch.as_tensor(ds.train_x[:64]), torch.as_tensor(ds.train_y[:64])
    torch.manual_seed(0)
    model = PEClassifier(ModelConfig(vocab_size=int(ds.vocab_size), n_classes=int(ds.n_classes), d_model=64,
                                     n_heads=8, d_ff=128, n_layers=4, max_len=ds.seq_len, dropout=0.0,
                                     scheme="rope")).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run(path: bool) -> float:
        for block in model.blocks:
            block.attn.fast_path_ok = lambda *_: path
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.perf_counter() - t0) / steps

    run(True), run(False)
    best = {True: float("inf"), False: float("inf")}
    for _ in range(repeats):
        for path in (False, True):
            best[path] = min(best[path], run(path))
    print(f"cpu-preset training step ({threads} threads, {x.shape[1]} tokens): explicit {best[False] * 1e3:.1f} ms, "
          f"SDPA {best[True] * 1e3:.1f} ms, ratio {best[False] / best[True]:.2f}x (load {os.getloadavg()[0]:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d-heads", default="8,16,32,64")
    ap.add_argument("--lens", default="24,48,96,128")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# torch {torch.__version__}, device {a.device}, {torch.get_num_threads()} threads, batch {a.batch}, "
          f"{a.heads} heads, load {os.getloadavg()[0]:.2f}")
    print("d_head  seq  explicit_ms  sdpa_ms  ratio(explicit/sdpa)")
    wins: dict[int, list[bool]] = {}
    for dh in (int(v) for v in a.d_heads.split(",")):
        for n in (int(v) for v in a.lens.split(",")):
            attn = _attention_of(ModelConfig(vocab_size=32, n_classes=4, d_model=dh * a.heads, n_heads=a.heads,
                                             d_ff=2 * dh * a.heads, n_layers=1, max_len=n, dropout=0.0,
                                             scheme="rope")).to(a.device).train()
            x = torch.randn(a.batch, n, dh * a.heads, device=a.device)
            lengths = torch.randint(n // 2, n + 1, (a.batch,), device=a.device)
            keep = torch.arange(n, device=a.device)[None, :] < lengths[:, None]
            mask = torch.zeros(a.batch, 1, n, n, device=a.device).masked_fill(~keep[:, None, None, :], MASK_VALUE)
            step_time(attn, x, mask, 2, True), step_time(attn, x, mask, 2, False)  # warm-up
            best = {True: float("inf"), False: float("inf")}
            for _ in range(a.repeats):
                for path in (False, True):
                    best[path] = min(best[path], step_time(attn, x, mask, a.steps, path))
            ratio = best[False] / best[True]
            wins.setdefault(dh, []).append(ratio > 1.0)
            print(f"{dh:>6} {n:>4} {best[False] * 1e3:>12.2f} {best[True] * 1e3:>8.2f} {ratio:>8.2f}x", flush=True)
    model_step(a.threads, a.repeats, a.steps)
    cross = next((dh for dh in sorted(wins) if all(wins[dh]) and all(all(wins[d]) for d in wins if d > dh)), None)
    print(f"# SDPA faster at every length from d_head {cross} on" if cross else "# SDPA never faster at every length")


if __name__ == "__main__":
    main()
