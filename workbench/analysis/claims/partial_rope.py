"""Partial RoPE (appendix C.3): the share of counted Task 1 runs whose largest deposit is in layer 1 or 2, and the
table of partial-RoPE variants beside full RoPE."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..common import tuples
from ..experiments import _kwargs
from ..settings import runs_grid
from .rules import (largest_layer, specificity, _deposit_agreement, _deposit_text, _deposits, _largest, _learned,
                    _row, _seed_label, _settled, _single_layers, _two_extra, _two_thresholds, _uncounted_notes,
                    _unshown, _verdict)
from .runs import _rests
from .status import COUNTS


def _partial_and_full_rope(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The `paper`-arch RoPE runs with RoPE on some heads only (tier 2), and full RoPE (tier 1)."""
    rope = runs[(runs.setting == "paper") & (runs.scheme == "rope")]
    return rope[rope.partial], rope[(rope.variant == "rope") & ~rope.partial]


DEEPER_LAYERS = (1, 2)  # 0-based: the paper's "second or third layer" (C.3)


def _partial_rope_claim(store, runs, th) -> dict:
    """The registered `partial-rope-deeper` (C.3: "the most significant deposit pattern is not necessarily in the
    first layer, but may be in the second or third layer"), on Task 1 only (C.1: the paper ran its partial-RoPE
    experiments on Task 1): a counted partial-RoPE run of the `paper` arch agrees when its largest single-head
    deposit is in layer 1 or 2 (0-based); "may be" is read as "in most counted runs", by the share rule over every
    counted partial-RoPE run (an existential reading passes on any one run); full RoPE is the contrast. The
    evidence names each run's largest deposit, whether layer 0 has one, and full RoPE's of the same seed."""
    claim = ("partial RoPE puts its most significant deposit in the second or third layer (layer 1 or 2) on Task 1")
    paper = "the most significant deposit is not necessarily in the first layer, but may be in the second or third"
    t1 = "trigger-distance"
    all_sub, full = _partial_and_full_rope(runs)
    if not all_sub.empty:
        all_sub, full = all_sub[all_sub.task == t1], full[full.task == t1]
    if all_sub.empty:
        return _row(claim, paper, "paper", "pending",
                    f"no partial-RoPE run on Task 1 yet (tier 2 of {runs_grid(runs)})",
                    [], claim_id="partial-rope-deeper")
    learned, sub = _learned(all_sub), _settled(all_sub)

    def deeper(d):
        return largest_layer(d) in DEEPER_LAYERS

    deps = _deposits(store, list(learned["run_id"]) + list(full["run_id"]))
    notes = []
    for r in tuples(learned):
        if r.run_id not in deps:
            notes.append(f"{r.variant} seed {_seed_label(r)}: trained, deposit not computed yet")
            continue
        d = deps[r.run_id]
        base = [_largest(deps[b])[1] for b in full[full.seed == r.seed].run_id if b in deps]
        counted = r.run_id in set(sub.run_id)
        notes.append(f"{r.variant} seed {_seed_label(r)} ("
                     + (f"test acc {r.test_acc:.3f}" if counted else f"not settled: {r.why}, not counted")
                     + f"): largest single-head deposit {_largest(d)[1]}"
                     + (f" ({'agrees' if deeper(d) else 'does not'})" if counted else "")
                     + f", layer 0 {'has one' if 0 in _single_layers(d) else 'has none'}; "
                     f"full RoPE {base[0] if base else 'not shipped'}")
    notes += _uncounted_notes(all_sub[~all_sub.learned.astype(bool)], label=lambda r: f"{r.variant} ")
    judged = _deposit_agreement(store, all_sub, th, deeper)
    agree, agree_also = [a for _, a, _ in judged], [b for _, _, b in judged]
    ev = "; ".join(notes)
    extra = {"claim_id": "partial-rope-deeper", "rests_on": _rests(sub, all_sub)}
    if judged:
        two = _two_thresholds(agree, agree_also, th)
        contrast = [a for _, a, _ in _deposit_agreement(store, full, th, deeper)]
        label, text = specificity(contrast, th, "full RoPE Task 1")
        ev += f". Decision: {two['text']}; {text}"
        extra.update(_two_extra(two), specificity=label)
    if sub.empty:
        verdict = _unshown(all_sub)
    elif not judged:
        verdict = "pending"
    else:
        verdict = _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, all_sub.run_id, **extra)


def _uncounted(g: pd.DataFrame) -> str:
    """The runs of `g` a mechanism claim would not count, with their status: "seed 42 still learning; ...", or
    "every seed ceiling, not settled" where all of several share one."""
    out = [(r.seed, r.status) for r in tuples(g) if r.status not in COUNTS]
    if len(g) > 1 and len(out) == len(g) and len({st for _, st in out}) == 1:
        return f"every seed {out[0][1]}"
    return "; ".join(f"seed {seed} {st}" for seed, st in out)


def partial_rope_pairs(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Tier 2's partial RoPE (RoPE on the first k heads of every layer, as the authors' partial-RoPE script, or of
    one layer only, as the paper's appendix C.3; NoPE on the other heads), `paper` arch, one row per (variant,
    task): k, the RoPE layers, seeds, mean test accuracy next to full RoPE's on the same task and seeds, and both
    runs' single-head deposits per seed (layer, head, zero-ablation drop), and how many of the partial run's
    deposits sit on a head that has RoPE (head < k in a RoPE layer): does the deposit follow the rotary heads?
    `uncounted`: the partial runs a mechanism claim would not count (not learned and settled), with their status."""
    cols = ["variant", "rope_heads", "rope_layers", "task", "n_seeds", "acc", "full_acc", "deposit",
            "deposits_on_rope_heads", "full_deposit", "uncounted", "runs"]
    sub, full = _partial_and_full_rope(runs)
    deps = _deposits(store, list(sub.run_id) + list(full.run_id))
    rows = []
    for (variant, task), g in sub.groupby(["variant", "task"], sort=False):
        kw = _kwargs(store.get(g.run_id.iloc[0]))
        layers, k = kw.get("rope_layers"), kw.get("rope_heads")
        base = full[(full.task == task) & full.seed.isin(g.seed)]
        on_rope = []
        for r in tuples(g):
            if r.run_id in deps:
                d = deps[r.run_id]
                d = d[d["single_head_deposit"]]
                hit = ((k is None or d["top_head"] < k) & (d["layer"].isin(layers) if layers is not None else True))
                on_rope.append(f"seed {r.seed}: {int(hit.sum())} of {len(d)}")
        rows.append({"variant": variant, "rope_heads": kw.get("rope_heads"), "task": task, "n_seeds": len(g),
                     "rope_layers": "every" if layers is None else ", ".join(str(l) for l in layers),
                     "acc": float(g.test_acc.mean()),
                     "full_acc": float(base.test_acc.mean()) if len(base) else np.nan,
                     "deposit": "; ".join(_deposit_text(deps.get(r.run_id), r.seed) for r in tuples(g)),
                     "deposits_on_rope_heads": "; ".join(on_rope) or "not computed yet",
                     "full_deposit": "; ".join(_deposit_text(deps.get(r.run_id), r.seed) for r in tuples(base))
                     or "no run",
                     "uncounted": _uncounted(g),
                     "runs": list(g.run_id) + list(base.run_id)})
    if not rows:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(rows, columns=cols).sort_values(["task", "rope_layers", "rope_heads"], ignore_index=True)
