"""Helpers shared by the analyses and the layers above them (figures, reports, dashboard, notebooks): labels,
data access, batching, hooks, rotary-plane discovery, run tagging, the bootstrap."""
from __future__ import annotations

import collections
import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd
import torch


class NotApplicable(Exception):
    """The analysis cannot be computed for this run; the message says why and what would work."""


# ---- display names (sentences, figure titles) -------------------------------------------------
TASK_NAMES = {"trigger-distance": "Task 1", "trigger-count": "Task 2"}


def scheme_label(scheme: str | None) -> str:
    """The registered scheme's `label` ("RoPE"); a name the registry does not know, as given; "model" for none."""
    from workbench.model.pe import scheme_label as registered

    return registered(scheme) if scheme else "model"


def task_label(task: str | None) -> str:
    return TASK_NAMES.get(task, task) if task else ""


# ---- data ------------------------------------------------------------------------------------
def split_xy(data: Any, split: str = "test") -> tuple[np.ndarray, np.ndarray | None]:
    """(x, y) of a split of a Dataset-like object, or of an (x, y) tuple / a bare token array."""
    if isinstance(data, tuple) and len(data) == 2:
        x, y = data
    elif isinstance(data, (np.ndarray, torch.Tensor)):
        x, y = data, None
    elif split in ("test", "train"):
        x, y = getattr(data, f"{split}_x"), getattr(data, f"{split}_y")
    else:
        x, y = data.extrap[split]
    x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if y is not None:
        y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    return x.astype(np.int64), (None if y is None else y.astype(np.int64))


def labelled_test(model, data: Any, n_examples: int | None, seed: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): `n_examples` seeded test examples (all when None) with labels the model has classes for; `what`
    names the analysis in the errors."""
    x, y = split_xy(data, "test")
    if y is None:
        raise ValueError(f"{what} needs labels: pass a Dataset or an (x, y) tuple")
    keep = subsample(len(x), n_examples, seed)
    x, y = x[keep], y[keep]
    if int(y.max()) >= model.cfg.n_classes:
        raise ValueError(f"labels up to {int(y.max())} but the model has {model.cfg.n_classes} classes")
    return x, y


def train_length(model, data: Any = None) -> int:
    """The training length L: the longest real (non-pad) sequence of the training data (the task spec's
    `train_len`, i.e. max_tokens) when known, else the dataset's padded seq_len, else the model's max_len."""
    n = getattr(getattr(data, "spec", None), "train_len", None) or getattr(data, "seq_len", None)
    return int(n) if n else int(model.cfg.max_len)


def subsample(n: int, k: int | None, seed: int) -> np.ndarray:
    """k distinct sorted indices out of n (all of them when k is None or >= n)."""
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def lengths(x: np.ndarray) -> np.ndarray:
    """Number of non-pad tokens per row (right padding: last non-pad index + 1)."""
    keep = x != 0
    return np.where(keep.any(1), x.shape[1] - np.argmax(keep[:, ::-1], axis=1), 0)


def batches(x: np.ndarray, batch_size: int, y: np.ndarray | None = None, trim: bool = False,
            device: str = "cpu") -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor | None]]:
    """Yield (indices, tokens, labels). With `trim`, examples are sorted by length and every batch is cut
    to its longest non-pad length (exact for right-padded inputs whose pads never influence non-pad
    positions, which holds for both architectures when the readout ignores pads)."""
    order = np.argsort(lengths(x), kind="stable") if trim else np.arange(len(x))
    for s in range(0, len(x), batch_size):
        idx = order[s:s + batch_size]
        xb = x[idx]
        if trim:
            n = max(1, int(lengths(xb).max()))
            xb = xb[:, :n]
        yb = None if y is None else torch.as_tensor(y[idx], device=device)
        yield idx, torch.as_tensor(xb, device=device), yb


@contextlib.contextmanager
def evaluating(model):
    """eval mode + no_grad, restoring the training flag afterwards."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was)


def valid_pairs(tokens: torch.Tensor, arch: str) -> torch.Tensor:
    """Bool [batch, q, k]: both positions non-pad (and k <= q in the causal decoder)."""
    keep = tokens != 0
    ok = keep[:, :, None] & keep[:, None, :]
    if arch == "decoder":
        n = tokens.shape[1]
        ok = ok & torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril()
    return ok


def trigger_pair(tok: torch.Tensor, y: torch.Tensor, triggers) -> tuple[torch.Tensor, torch.Tensor]:
    """Task 1's trigger pair of each row, (p1 [B], p2 [B]): the first w1 whose w2 lies y (the label: the distance
    p2 - p1) after it. Where the filler may hold the trigger words (the authors' data, `filler_includes_triggers`)
    a row's first w1 or w2 need not be its pair's (14 % of t1-rope-repro-s42-40a0c6's test rows); elsewhere the
    pair is the only w1 and w2 of the row. ValueError when a row has no such pair."""
    w1, w2 = int(triggers[0]), int(triggers[1])
    n = tok.shape[1]
    y = torch.as_tensor(y, device=tok.device).long()
    at = torch.arange(n, device=tok.device)[None] + y[:, None]  # [B, pos]: where each position's w2 would be
    hit = (tok == w1) & (at < n) & (tok.gather(1, at.clamp(max=n - 1)) == w2)
    if not bool(hit.any(1).all()):
        raise ValueError("some Task 1 rows have no w1 with its w2 at the label's distance after it: the dataset, "
                         "its labels and its trigger ids do not match")
    p1 = hit.float().argmax(1)
    return p1, p1 + y


def cache_hooks(model, tokens: torch.Tensor, names: list[str], fwd_hooks: list = ()) -> dict[str, torch.Tensor]:
    """Forward once with hooks that store the named activations (nothing else is kept), after `fwd_hooks` (an
    intervention: a hook point it changes is stored as changed)."""
    store: dict[str, torch.Tensor] = {}

    def save(t, hook):
        store[hook.name] = t.detach()
        return t

    model.run_with_hooks(tokens, fwd_hooks=list(fwd_hooks) + [(n, save) for n in names])
    return store


# ---- rotary planes ---------------------------------------------------------------------------
@dataclass
class RotaryPlanes:
    """Which (head, plane) of a layer rotate, and at what angular frequency (radians per position).

    `theta[h, j]` is the angle plane j (dims 2j, 2j+1) of head h turns by per position, NaN where the plane
    does not rotate."""

    theta: np.ndarray  # [n_heads, d_head // 2]

    @property
    def rotates(self) -> np.ndarray:
        return ~np.isnan(self.theta)


def rotary_planes(attn, n_heads: int, width: int) -> RotaryPlanes:
    """The rotary planes of one attention module, for q/k vectors of `width` dims (hook_q's last axis).

    Read from the attributes the rotary schemes share: `inv_freq` (theta_j), `rot_offset` (first rotary dim,
    0 unless MLA), `d_rot` (number of rotary dims), `rot_heads` (bool per head, partial RoPE) and, for FoPE,
    `frequencies()` (clipped planes have frequency 0 and do not rotate). A scheme may instead expose
    `rotary_planes() -> [n_heads, width//2]`. Without any of these, `rotate` is probed with basis vectors at
    positions 0 and 1 (a plane rotates iff e_2j comes back turned inside its plane). NotApplicable where the rotary
    dims start at an odd dim (MLA with an odd d_head): they form no plane (2j, 2j + 1)."""
    if hasattr(attn, "rotary_planes"):
        return RotaryPlanes(np.asarray(attn.rotary_planes(), dtype=np.float64))
    theta = np.full((n_heads, width // 2), np.nan)
    if hasattr(attn, "inv_freq"):
        freq = attn.frequencies() if hasattr(attn, "frequencies") else attn.inv_freq
        freq = freq.detach().double().cpu().numpy()
        offset = int(getattr(attn, "rot_offset", 0))
        if offset % 2:
            raise NotApplicable(f"the rotary dims start at dim {offset} (MLA with an odd d_head): the plane analyses "
                                "pair dims (2j, 2j + 1), which would mix a content dim into each plane; use an even "
                                "d_head (d_model / n_heads)")
        d_rot = int(getattr(attn, "d_rot", 2 * len(freq)))
        heads = getattr(attn, "rot_heads", None)
        heads = np.ones(n_heads, bool) if heads is None else heads.detach().cpu().numpy().astype(bool)
        n = min(d_rot // 2, len(freq))
        vals = np.where(freq[:n] > 0, freq[:n], np.nan)  # frequency 0 (FoPE's clipped planes): no rotation
        theta[np.ix_(heads, np.arange(offset // 2, offset // 2 + n))] = vals
        return RotaryPlanes(theta)
    dev = next(attn.parameters()).device
    basis = torch.eye(width, device=dev)[0::2]  # e_{2j}: [n_planes, width]
    probe = basis[:, None, None, :].expand(-1, 2, n_heads, -1).contiguous()  # [plane, pos=2, head, width]
    with torch.no_grad():
        try:
            rq, _ = attn.rotate(probe, probe.clone())
        except Exception:  # a scheme whose rotate needs more than (q, k)
            return RotaryPlanes(theta)
    out = rq[:, 1].double().cpu().numpy()  # [plane, head, width]
    for j in range(width // 2):
        v = out[j]
        inside = v[:, 2 * j:2 * j + 2]
        rest = np.delete(v, [2 * j, 2 * j + 1], axis=1)
        turned = np.abs(inside - np.array([1.0, 0.0])).max(1) > 1e-6
        clean = (np.abs(rest).max(1, initial=0.0) < 1e-5) & (np.abs(np.hypot(*inside.T) - 1) < 1e-4)
        ang = np.arctan2(inside[:, 1], inside[:, 0])
        theta[:, j] = np.where(turned & clean, np.abs(ang), np.nan)
    return RotaryPlanes(theta)


def rope_frequencies(d_head: int, base: float = 10000.0) -> np.ndarray:
    """theta_j = base^(-2j/d), j = 0 .. d/2-1."""
    return base ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)


# ---- runs ------------------------------------------------------------------------------------
def run_data(run):
    """The run's dataset as its training counted it: with `train.ignore_label` set (the authors' transformer
    script: `CrossEntropyLoss(ignore_index=0)`, accuracy over labels != 0; docs/fidelity.md row 8), examples
    with that label are dropped from every split, so an analysis's clean accuracy is the run's test accuracy."""
    import dataclasses

    ds = run.load_dataset()
    ignore = (run.config.get("train") or {}).get("ignore_label")
    if ignore is None:
        return ds

    def keep(x, y):
        k = np.asarray(y) != ignore
        return x[k], y[k]

    return dataclasses.replace(ds, train_x=keep(ds.train_x, ds.train_y)[0], train_y=keep(ds.train_x, ds.train_y)[1],
                               test_x=keep(ds.test_x, ds.test_y)[0], test_y=keep(ds.test_x, ds.test_y)[1],
                               extrap={name: keep(x, y) for name, (x, y) in ds.extrap.items()})


def run_meta(run) -> dict[str, Any]:
    """run_id / scheme / task / arch / seed of a store run, tolerant of missing sections."""
    cfg = getattr(run, "config", {}) or {}
    model = cfg.get("model", {}) or {}
    task = cfg.get("task", {}) or {}
    train = cfg.get("train", {}) or {}
    task_name = task.get("name") or task.get("task") if isinstance(task, dict) else task
    return {"run_id": getattr(run, "id", None), "scheme": model.get("scheme"), "task": task_name,
            "arch": model.get("arch"), "seed": train.get("seed", model.get("seed"))}


@functools.lru_cache(maxsize=256)
def _row_type(fields: tuple) -> type:
    return collections.namedtuple("Pandas", fields, rename=True)


def tuples(df: pd.DataFrame) -> Iterator[tuple]:
    """The rows of `df` as `df.itertuples()` gives them (a namedtuple each: Index, then the columns, as Python
    scalars), read through one object array instead of one Series per column: about 4x faster on the 35-column run
    table, which the claims read in small pieces some 1,500 times per judging."""
    row = _row_type(("Index", *df.columns))
    return (row._make((i, *values)) for i, values in zip(df.index.tolist(), df.to_numpy(object).tolist()))


def tag(df: pd.DataFrame, run) -> pd.DataFrame:
    """Prepend run_id / scheme / task (and seed, when the run records one) columns, so tables of many runs can
    be concatenated and their figures can tell runs of one scheme and task apart."""
    meta = run_meta(run)
    df = df.copy()
    for i, key in enumerate(("run_id", "scheme", "task", "seed")):
        if key not in df.columns and (key != "seed" or meta[key] is not None):
            df.insert(i, key, meta[key])
    return df


def streams(model, tokens: torch.Tensor):
    """(memory M, mask, [residual stream before each layer], final stream) of one forward of `tokens`."""
    memory, mask = model.embed_input(tokens), model.mask(tokens)
    resid, x = [], memory
    for block in model.blocks:
        resid.append(x)
        x = block(x, memory, mask)
    return memory, mask, resid, x


def stored(name: str, compute):
    """`run(run, **params)` of an analysis that needs nothing but the run's model and dataset: load both, `compute`,
    `tag`, store as table `name` and return it (the analyses with more to do, ablation's modes, deposit,
    attribution's check, head_summary's join, have their own `run`)."""
    def run(run, **params) -> pd.DataFrame:
        df = tag(compute(run.load_model(), run_data(run), **params), run)
        run.save_table(name, df)
        return df

    run.__doc__ = f"Load the run's model and dataset, compute, save as table `{name}` ({compute.__module__})."
    return run


def exact(v):
    """`v` (a number or an array) rounded to 6 decimals, for comparing with a registered threshold as the number it
    stands for: accuracies and their drops are counts over n examples (multiples of 1/n, n < 10^5, so no two differ
    by less than 1e-5), which float subtraction leaves 1e-17 off (a drop of 50 in 1,000 computes as 0.04999999999999993)
    and a table shipped in float32 1e-8 off (0.15 reads 0.15000000596)."""
    return np.round(v, 6)


def bootstrap_weights(n: int, n_boot: int, seed: int, chunk: int = 64) -> Iterator[np.ndarray]:
    """Yield chunks of bootstrap resampling counts [chunk, n] (each row sums to n), seeded."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_boot:
        m = min(chunk, n_boot - done)
        idx = rng.integers(0, n, size=(m, n))
        counts = np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.float64)
        done += m
        yield counts


def bootstrap_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of the column means of `values` [n, k] -> [n_boot, k] (same resamples for
    every column, so differences between columns are paired)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    n = values.shape[0]
    out = [w @ values / n for w in bootstrap_weights(n, n_boot, seed)]
    return np.concatenate(out, 0)


def percentile_interval(reps: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    a = (1 - level) / 2
    return np.quantile(reps, a, axis=0), np.quantile(reps, 1 - a, axis=0)

