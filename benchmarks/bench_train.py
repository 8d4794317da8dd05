"""Training speed: the PE-Lab model + loop settings vs. a plain eager reference written like the authors' scripts.

Both models are built in ONE process from the same config and trained on real batches of the task's data; the
timings are interleaved (PE-Lab, reference, PE-Lab, ...) and the best repeat of each is kept, so background
load on a shared machine hurts both alike. Reported: useful (non-pad) training tokens per second (forward +
backward + AdamW step) and the ratio PE-Lab / reference, per task and scheme, plus the peak resident memory.

The reference (`RefClassifier`) is what the authors' scripts do: per-layer `nn.Linear` q/k/v/o projections,
explicit `softmax(q k^T / sqrt(d) + mask)` attention with `nn.Dropout` on the weights, RoPE recomputed with
sin/cos on every forward, fp32, the default (for-each) AdamW, random batches padded to the data's full length.
The PE-Lab side is `PEClassifier` with the training loop's settings: length-grouped batches trimmed to their
longest sequence (`train.batching=length`, `epoch_batches`), the attention path gate, on CUDA bf16 autocast +
fused AdamW (+ torch.compile with --compile), on CPU fp32.

    python benchmarks/bench_train.py                        # CPU, cpu preset, both tasks, a few minutes
    python benchmarks/bench_train.py --scale paper-cpu      # 6 layers x 16 heads, d_model 128 on cpu data
    python benchmarks/bench_train.py --scale paper          # paper scale (GPU)
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DATA = {"cpu": "cpu", "paper-cpu": "cpu", "paper": "paper"}  # the synthetic_tasks preset each scale trains on
SCALES = {  # model sizes of the presets, sequence length of their data (vocab / classes: from the data), a batch
    "cpu": dict(d_model=64, n_heads=8, d_ff=128, n_layers=4, seq_len=48, batch=64,
                dropout=0.0),
    "paper-cpu": dict(d_model=128, n_heads=16, d_ff=256, n_layers=6, seq_len=48, batch=64,
                      dropout=0.0),
    "paper": dict(d_model=256, n_heads=16, d_ff=512, n_layers=6, seq_len=128, batch=512,
                  dropout=0.1),
}


# ---- the reference: how the authors' scripts write it -------------------------------------------------
class RefRoPE(nn.Module):
    def __init__(self, d_head: int, base: float = 10000.0):
        super().__init__()
        self.d_head, self.base = d_head, base

    def forward(self, x):  # x [batch, head, pos, d_head]; interleaved pairs, recomputed every call
        n = x.shape[2]
        inv = 1.0 / (self.base ** (torch.arange(0, self.d_head, 2, device=x.device).float() / self.d_head))
        ang = torch.arange(n, device=x.device).float()[:, None] * inv[None, :]
        sin, cos = torch.sin(ang).repeat_interleave(2, -1), torch.cos(ang).repeat_interleave(2, -1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).reshape(x.shape)
        return x * cos + rot * sin


class RefAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout, rope):
        super().__init__()
        self.h, self.dh = n_heads, d_model // n_heads
        self.q, self.k, self.v = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.rope = RefRoPE(self.dh) if rope else None

    def forward(self, x_q, x_kv, pad_mask):
        b, n, d = x_q.shape
        q = self.q(x_q).view(b, n, self.h, self.dh).transpose(1, 2)
        k = self.k(x_kv).view(b, n, self.h, self.dh).transpose(1, 2)
        v = self.v(x_kv).view(b, n, self.h, self.dh).transpose(1, 2)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dh)
        scores = scores.masked_fill(pad_mask[:, None, None, :], -1e9)
        attn = self.drop(torch.softmax(scores, dim=-1))
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, d)
        return self.o(out)


class RefLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout, rope):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = RefAttention(d_model, n_heads, dropout, rope)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, memory, pad_mask):
        x = x + self.drop1(self.attn(self.ln1(x), memory, pad_mask))  # keys/values from the embedded input
        return x + self.drop2(self.ff(self.ln2(x)))


class RefClassifier(nn.Module):
    """The `paper` architecture as the authors' scripts write it (docs/paper.md §2)."""

    def __init__(self, vocab, n_classes, d_model, n_heads, d_ff, n_layers, dropout, rope):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=0)
        self.layers = nn.ModuleList(RefLayer(d_model, n_heads, d_ff, dropout, rope) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, tokens):
        pad = tokens == 0
        memory = self.embed(tokens)
        x = memory
        for layer in self.layers:
            x = layer(x, memory, pad)
        keep = (~pad).float().unsqueeze(-1)
        return self.head(self.ln((x * keep).sum(1) / keep.sum(1).clamp(min=1)))


# ---- timing -----------------------------------------------------------------------------------------------
def real_batches(task: str, scale: str, batch: int, steps: int, batching: str, trim: bool, device):
    """The first `steps` training batches of epoch 0 of the task's data, as the training loop forms them."""
    from synthetic_tasks import get_spec, load_or_generate
    from workbench.train.loop import epoch_batches
    from workbench.train.loop import trim as trim_pads

    ds = load_or_generate(get_spec(task, preset=DATA[scale], seed=42))
    x, y = torch.as_tensor(ds.train_x), torch.as_tensor(ds.train_y)
    out = []
    for idx in epoch_batches((x != 0).sum(1), batch, 42, 0, batching)[:steps]:
        xb = trim_pads(x[idx]) if trim else x[idx]
        out.append((xb.to(device), y[idx].to(device)))
    return out, int(ds.vocab_size), int(ds.n_classes)


def step_fn(model, opt, batches, amp):
    """One training step per call, cycling through `batches`; returns the useful tokens it trained on."""
    it = {"i": 0}

    def step():
        x, y = batches[it["i"] % len(batches)]
        it["i"] += 1
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return int((x != 0).sum())
    return step


def time_steps(step, n, device) -> tuple[float, int]:
    """(seconds, useful tokens) of n steps."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t, tokens = time.perf_counter(), 0
    for _ in range(n):
        tokens += step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t, tokens


def bench(task: str, scheme: str, scale: str, s: dict, device: torch.device, steps: int, repeats: int,
          compile: bool, use_sdpa: bool = True) -> dict:
    from workbench.model import ModelConfig, PEClassifier
    from workbench.train.loop import compiled

    cuda = device.type == "cuda"
    ours_b, vocab, n_classes = real_batches(task, scale, s["batch"], steps, "length", True, device)
    ref_b, _, _ = real_batches(task, scale, s["batch"], steps, "random", False, device)
    cfg = ModelConfig(vocab_size=vocab, n_classes=n_classes, arch="paper", scheme=scheme,
                      d_model=s["d_model"], n_heads=s["n_heads"], d_ff=s["d_ff"], n_layers=s["n_layers"],
                      max_len=s["seq_len"], dropout=s["dropout"], use_sdpa=use_sdpa)
    torch.manual_seed(0)
    ours = PEClassifier(cfg).to(device).train()
    ref = RefClassifier(vocab, n_classes, s["d_model"], s["n_heads"], s["d_ff"], s["n_layers"],
                        s["dropout"], rope=scheme == "rope").to(device).train()
    n_ours = sum(p.numel() for p in ours.parameters())
    n_ref = sum(p.numel() for p in ref.parameters())
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=cuda)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-4)
    fwd = compiled(ours, ours_b[0][0], cuda) if compile else ours
    steps_ours, steps_ref = step_fn(fwd, opt_ours, ours_b, amp=cuda), step_fn(ref, opt_ref, ref_b, amp=False)
    for step in (steps_ours, steps_ref):  # warm-up (and compilation)
        time_steps(step, 3, device)
    r_ours, r_ref = [], []
    for _ in range(repeats):
        t, n = time_steps(steps_ours, steps, device)
        r_ours.append(n / t)
        t, n = time_steps(steps_ref, steps, device)
        r_ref.append(n / t)
    best_ours, best_ref = max(r_ours), max(r_ref)
    pad = lambda b: 1 - sum(int((x != 0).sum()) for x, _ in b) / sum(x.numel() for x, _ in b)  # noqa: E731
    return {"task": task, "scheme": scheme, "params_pelab": n_ours, "params_ref": n_ref,
            "pelab_tok_s": best_ours, "ref_tok_s": best_ref, "ratio": best_ours / best_ref,
            "median_ratio": sorted(r_ours)[len(r_ours) // 2] / sorted(r_ref)[len(r_ref) // 2],
            "pelab_pad_frac": pad(ours_b), "ref_pad_frac": pad(ref_b)}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default=None, help="default: paper on CUDA, cpu on CPU")
    ap.add_argument("--device", default=None)
    ap.add_argument("--schemes", default="rope,nope")
    ap.add_argument("--tasks", default="trigger-distance,trigger-count")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--dropout", type=float, default=None, help="default: the scale's (paper 0.1, else 0.0)")
    ap.add_argument("--steps", type=int, default=None, help="steps (real batches) per timing repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "2")))
    ap.add_argument("--compile", action="store_true", help="torch.compile the PE-Lab model")
    ap.add_argument("--no-sdpa", action="store_true", help="PE-Lab model with use_sdpa=False (explicit attention)")
    a = ap.parse_args(argv)
    from workbench.train.loop import peak_rss_mb

    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.set_num_threads(a.threads)
    scale = a.scale or ("paper" if device.type == "cuda" else "cpu")
    s = dict(SCALES[scale])
    if a.batch:
        s["batch"] = a.batch
    if a.dropout is not None:
        s["dropout"] = a.dropout
    steps = a.steps or (20 if device.type == "cuda" else 10)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or platform.machine()}), "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
    print(f"scale {scale}: {s}; {steps} real batches x {a.repeats} interleaved repeats, best of each; "
          f"compile={a.compile}, use_sdpa={not a.no_sdpa}")
    rows = []
    for task in a.tasks.split(","):
        for scheme in a.schemes.split(","):
            r = bench(task, scheme, scale, s, device, steps, a.repeats, a.compile, use_sdpa=not a.no_sdpa)
            rows.append(r)
            print(f"{task:>16} {scheme:>5}: PE-Lab {r['pelab_tok_s']:8.0f} useful tok/s (pads {r['pelab_pad_frac']:.0%}) "
                  f"| reference {r['ref_tok_s']:8.0f} (pads {r['ref_pad_frac']:.0%}) | ratio {r['ratio']:.2f}x "
                  f"(median {r['median_ratio']:.2f}x) | params {r['params_pelab']} vs {r['params_ref']}", flush=True)
    print(f"peak RSS of this process: {peak_rss_mb():.0f} MiB; load at the end {os.getloadavg()[0]:.2f}")
    return rows


if __name__ == "__main__":
    main()
