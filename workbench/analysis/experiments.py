"""The core paper's experiments (seed 003) as functions over sets of runs from the store.

Every function takes a `RunStore` (plus filters) or an explicit list of runs and returns one tidy table:

    partial_rope(store)               section 5.1 / App. C.3: RoPE on the first k heads of layer l (or of every
                                      layer), NoPE elsewhere: accuracy and where the deepest deposit sits
    rope_vs_rope_sinusoidal(store)    section 5.2, first strategy: does the sinusoid move the deposit out of layer 0?
    mla_rope_nope(store)              Table 1 + Fig. 7: accuracy and deposit of MLA vs RoPE vs NoPE
    convergence(store)                Figs. 2-3: train/test accuracy and loss per epoch per scheme and task
    qkv_shares(store)                 where each run's heads take in the counterfactual difference: the share of
                                      sum |AtP*| over heads through queries, keys and values (`qkv.shares`), run
                                      by run, from each run's stored `qkv` table

Deposits come from each run's stored `deposit` table, else from its `ablation` table, else (with
`compute_missing=True`) the ablation sweep is run and stored first.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .common import NotApplicable, run_meta, task_label
from .baselines import run_baselines
from .deposit import compute as deposit_compute
from .deposit import deposit_sentence
from .settings import base_scheme, describe, is_plain

PAPER_TABLE1 = {("mla", "trigger-distance"): 0.8834, ("mla", "trigger-count"): 0.9741,
                ("rope", "trigger-distance"): 0.9264, ("rope", "trigger-count"): 0.6943,
                ("nope", "trigger-distance"): 0.0351, ("nope", "trigger-count"): 0.7769}


def _select(store=None, runs: Iterable | None = None, schemes: Iterable[str] | None = None, task=None,
            status: str | None = "finished", **filters) -> list:
    if runs is not None:
        out = list(runs)
        if schemes is not None:
            out = [r for r in out if run_meta(r)["scheme"] in set(schemes)]
        if task is not None:
            out = [r for r in out if run_meta(r)["task"] in (task if isinstance(task, (list, tuple)) else [task])]
        return out
    if store is None:
        from workbench.store import RunStore

        store = RunStore()
    return store.runs(scheme=list(schemes) if schemes is not None else None, task=task, status=status, **filters)


def final_metrics(run) -> dict[str, float]:
    """Last epoch's test/train accuracy and loss (from run.final or metrics())."""
    final = dict(getattr(run, "final", {}) or {})
    if not final:
        m = run.metrics()
        final = m.iloc[-1].to_dict() if len(m) else {}
    return {k: float(final[k]) if final.get(k) is not None else np.nan
            for k in ("test_acc", "test_loss", "train_acc", "train_loss")}


def run_deposit(run, compute_missing: bool = True, **ablation_params) -> pd.DataFrame:
    """The run's deposit table: stored, or computed from its ablation table (computed if missing)."""
    tables = set(run.tables())
    if "deposit" in tables:
        return run.load_table("deposit")
    if "ablation" in tables:
        abl = run.load_table("ablation")
    elif compute_missing:
        from . import ANALYSES

        abl = ANALYSES["ablation"](run, **ablation_params)
    else:
        raise NotApplicable(f"run {run.id} has no ablation table; run `workbench analyze {run.id} --what ablation` "
                            "or pass compute_missing=True")
    dep = deposit_compute(abl)
    return dep


def _deepest(dep: pd.DataFrame, col: str) -> float:
    layers = dep.loc[dep[col], "layer"]
    return float(layers.max()) if len(layers) else np.nan


def _meta(run, variant: bool = True) -> dict[str, Any]:
    """`run_meta` plus the run's setting (`settings.describe`): preset, setting and (with `variant`) variant, so
    figures never average runs of two settings."""
    s = describe(run.config)
    return {**run_meta(run), "preset": s.preset, "setting": s.setting, **({"variant": s.variant} if variant else {})}


def _kwargs(run) -> dict[str, Any]:
    kw = (run.config.get("model", {}) or {}).get("scheme_kwargs") or {}
    return kw if isinstance(kw, dict) else json.loads(kw)


def partial_rope(store=None, runs=None, task=None, compute_missing: bool = True, **ablation_params) -> pd.DataFrame:
    """One row per RoPE run (full and partial): k heads with RoPE, the RoPE layer (-1 = every layer),
    accuracy, and the deepest single-head / any deposit layer."""
    rows = []
    for run in _select(store, runs, schemes=["rope"], task=task):
        meta, kw, cfg = _meta(run, variant=False), _kwargs(run), run.config["model"]
        H, n_layers = int(cfg.get("n_heads", 16)), int(cfg.get("n_layers", 6))
        heads, layers = kw.get("rope_heads"), kw.get("rope_layers")
        k = H if heads is None else (heads if isinstance(heads, int) else -1)
        layer = -1 if layers is None or len(layers) == n_layers else (layers[0] if len(layers) == 1 else -2)
        variant = "full" if heads in (None, H) and layers is None else "partial"
        dep = run_deposit(run, compute_missing, **ablation_params)
        dep = dep[dep["metric"] == "accuracy"]
        rows.append({**meta, "variant": variant, "k": k, "layer": layer,
                     "k_per_layer": json.dumps(heads) if isinstance(heads, list) else "",
                     "rope_layers": "all" if layers is None else json.dumps(layers),
                     **final_metrics(run),
                     "deepest_single_deposit_layer": _deepest(dep, "single_head_deposit"),
                     "deepest_deposit_layer": _deepest(dep, "single_head_deposit") if dep["single_head_deposit"].any()
                     else _deepest(dep, "average_deposit"),
                     "n_single_deposits": int(dep["single_head_deposit"].sum()),
                     "max_concentration": float(dep["concentration"].max()),
                     "deposit": deposit_sentence(dep, meta["scheme"], meta["task"])})
    return pd.DataFrame(rows)


def rope_vs_rope_sinusoidal(store=None, runs=None, task=None, compute_missing: bool = True,
                            **ablation_params) -> pd.DataFrame:
    """One row per run and layer for `rope` and `rope+sinusoidal`: deposit pattern, concentration, top head."""
    rows = []
    for run in _select(store, runs, schemes=["rope", "rope+sinusoidal"], task=task):
        meta = _meta(run)
        if _kwargs(run).get("rope_heads") is not None or _kwargs(run).get("rope_layers") is not None:
            continue  # partial RoPE belongs to `partial_rope`
        dep = run_deposit(run, compute_missing, **ablation_params)
        dep = dep[dep["metric"] == "accuracy"]
        fm = final_metrics(run)
        for _, r in dep.iterrows():
            rows.append({**meta, "layer": int(r.layer), "pattern": r.pattern, "concentration": r.concentration,
                         "top_head": int(r.top_head), "top_delta": r.top_delta, "top_lo": r.top_lo,
                         "top_hi": r.top_hi, "sum_delta": r.sum_delta, "test_acc": fm["test_acc"]})
    return pd.DataFrame(rows)


def mla_rope_nope(store=None, runs=None, task=None, compute_missing: bool = True, **ablation_params) -> pd.DataFrame:
    """One row per run of mla / rope / nope -- the variants that stand for them (`settings.base_scheme`: the authors'
    `rope`, which runs rope+sinusoidal, and tier 4's `rope-final-ln` too; not partial RoPE): accuracy next to the
    paper's Table 1 (on a setting's plain run only, `settings.is_plain`) and the deposit summary."""
    rows = []
    for run in _select(store, runs, schemes=["mla", "rope", "nope", "rope+sinusoidal"], task=task):
        meta = _meta(run)
        base = base_scheme(meta["variant"], meta["scheme"])
        if base not in ("mla", "rope", "nope") or (meta["scheme"] == "rope" and (
                _kwargs(run).get("rope_heads") is not None or _kwargs(run).get("rope_layers") is not None)):
            continue
        dep = run_deposit(run, compute_missing, **ablation_params)
        dep = dep[dep["metric"] == "accuracy"]
        rows.append({**meta, **final_metrics(run), "base": base,
                     "paper_test_acc": PAPER_TABLE1.get((base, meta["task"]), np.nan)
                     if is_plain(meta["variant"], meta["scheme"]) else np.nan,
                     "n_single_deposits": int(dep["single_head_deposit"].sum()),
                     "n_average_deposits": int(dep["average_deposit"].sum()),
                     "max_concentration": float(dep["concentration"].max()),
                     "max_top_delta": float(dep["top_delta"].max()),
                     "deposit": deposit_sentence(dep, meta["scheme"], meta["task"])})
    return pd.DataFrame(rows)


def convergence(store=None, runs=None, schemes=None, task=None, baselines: bool = True) -> pd.DataFrame:
    """Long table: run_id, scheme, task, arch, seed, preset, setting, variant, label, epoch, split (train/test),
    metric (accuracy/loss), value. `label` (= variant, `settings.variant_of`) tells runs of one scheme apart: the
    run's tag, else the scheme plus its non-default scheme_kwargs.
    With `baselines`, accuracy rows also carry the split's `chance` and `length_only` levels
    (`baselines.run_baselines`, read from the run's dataset; NaN for loss rows and runs without a dataset)."""
    blocks = list(_convergence_blocks(_select(store, runs, schemes=schemes, task=task, status=None), baselines))
    if not blocks:
        raise NotApplicable("no run with per-epoch metrics matched; train some runs first (`workbench train`)")
    return long_frame(blocks)


def _convergence_blocks(runs, baselines: bool):
    """`convergence`'s rows as (columns, n) blocks, one a run, split and metric: meta scalars and per-epoch lists."""
    for run in runs:
        m = run.metrics()
        if m.empty:
            continue
        meta = _meta(run)
        bl = run_baselines(run) if baselines else None
        bl = bl.set_index("split") if bl is not None else None
        epochs = m["epoch"].astype(int).tolist()
        for split in ("train", "test"):
            for metric, col in (("accuracy", f"{split}_acc"), ("loss", f"{split}_loss")):
                if col not in m.columns:
                    continue
                ref = {k: (float(bl.loc[split, k]) if bl is not None and metric == "accuracy" else np.nan)
                       for k in ("chance", "length_only")}
                yield ({**meta, "label": meta["variant"], "epoch": epochs, "split": split, "metric": metric,
                        "value": m[col].astype(float).tolist(), **ref}, len(epochs))


def long_frame(blocks: list[tuple[dict[str, Any], int]]) -> pd.DataFrame:
    """One frame of (columns, n) blocks, framed once: a list is a block's n values, a scalar is repeated n times, a
    column a block lacks is NaN there, a column holding None keeps it (object): the frame pd.concat of a frame a block
    gives, which took 20 ms a run's four blocks over the shipped store's runs (benchmarks/bench_convergence.py)."""
    def column(k):
        values = [x for block, n in blocks for x in (
            block[k] if isinstance(block.get(k), list) else [block.get(k, np.nan)] * n)]
        return pd.Series(values, dtype=object) if any(v is None for v in values) else values  # None kept, as concat

    return pd.DataFrame({k: column(k) for k in dict.fromkeys(k for block, _ in blocks for k in block)})


def _per_run(table: str, rows, hint: str, store=None, runs=None, schemes=None, task=None) -> pd.DataFrame:
    """`rows(table's DataFrame)` for every selected run that stores `table`, each tagged with the run's meta, its
    final `test_acc` and a label (scheme, task, seed and test accuracy in words: a run that did not learn shows it),
    meta columns first; NotApplicable naming `hint` when none has it."""
    frames = []
    for run in _select(store, runs, schemes=schemes, task=task, status=None):
        if table not in run.tables():
            continue
        meta = _meta(run)
        seed = f", seed {meta['seed']}" if meta.get("seed") is not None else ""
        acc = (getattr(run, "final", None) or {}).get("test_acc")
        test = f" · test {acc:.0%}" if isinstance(acc, (int, float)) else ""
        frames.append(rows(run.load_table(table)).assign(
            **meta, test_acc=acc, label=f"{meta['variant']} · {task_label(meta['task'])}{seed}{test}"))
    if not frames:
        raise NotApplicable(f"no selected run has a {table} table: compute it (`workbench analyze RUN --what "
                            f"{hint}`, or the Heads page's Compute)")
    out = pd.concat(frames, ignore_index=True)
    first = ["run_id", "scheme", "task", "seed", "preset", "setting", "variant", "test_acc", "label"]
    return out[[c for c in first if c in out.columns] + [c for c in out.columns if c not in first]]


def qkv_shares(store=None, runs=None, schemes=None, task=None, positions: str = "all") -> pd.DataFrame:
    """Long table, three rows a run with a stored `qkv` table: run_id, scheme, task, seed, preset, setting,
    variant, test_acc, label (scheme, task, seed and test accuracy in words), site, total, share, net, top_head,
    top_effect (`qkv.shares` at `positions`), measure (what they sum: "real patch" where every row was patched,
    `qkv.compute(check_per_site=None)`, else "AtP*"), note (qkv's: why every effect is undefined, e.g. NoPE on Task
    1, where moving a trigger changes nothing the model sees). Runs without the table are left out."""
    from .qkv import exact, shares

    def rows(df):
        value, measure = ("patch_effect", "real patch") if exact(df, positions) else ("effect", "AtP*")
        return shares(df, positions, value).assign(measure=measure, note=str(df["note"].iloc[0]))

    return _per_run("qkv", rows, "qkv", store, runs, schemes, task)


def self_repair_shares(store=None, runs=None, schemes=None, task=None) -> pd.DataFrame:
    """Long table, four rows a run with a stored `self_repair` table: run_id, scheme, task, seed, preset, setting,
    variant, test_acc, label, part (kept, via_heads, via_mlps, via_layernorm), share, sum_direct, mode
    (`self_repair.shares`: of the heads' summed |direct effect|, what their ablations still show and what the rest
    made up). Runs without the table are left out."""
    from .self_repair import shares

    return _per_run("self_repair", shares, "self-repair", store, runs, schemes, task)


EXPERIMENTS = {"partial_rope": partial_rope, "rope_vs_rope_sinusoidal": rope_vs_rope_sinusoidal,
               "mla_rope_nope": mla_rope_nope, "convergence": convergence, "qkv_shares": qkv_shares,
               "self_repair_shares": self_repair_shares}
