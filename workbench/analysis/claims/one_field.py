"""One setting at a time: the authors' settings with one field set back to PE-Lab's value, beside their baseline
(a difference between runs that did not learn or did not settle is no effect)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common import tuples
from ..settings import BASE_VARIANTS
from .rules import json_value, _deposit_heads, _row_settled
from .runs import mean_ci

PAD_FIELDS = ("model.attn_pad_mask", "model.readout_include_pad", "model.pad_trained")  # what pads change


def config_changes(base: dict[str, Any], other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields of the model, task and train sections where `other` differs from `base`: {key: (base, other)}
    (None where a field is absent). A field added after one of the two was stored counts as the value that run
    implicitly had (`store.with_later_defaults`), not as a change."""
    from workbench.store import flat_config

    a, b = ({k: v for k, v in flat_config(c).items() if k.split(".")[0] in ("model", "task", "train")}
            for c in (base, other))
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def one_setting(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Each run of the authors' settings named `<base>-<what>` (base one of BASE_VARIANTS: the tier-4 variants
    of grids/repro.toml) next to the `<base>` run of the same setting, task and seed: the fields changed (from
    the two config.json), both test accuracies and the difference. Aggregated over seeds per (setting, variant,
    task): mean difference with a Student-t 95 % interval, and whether it is beyond the baseline's seed spread
    (`seed_spread`: the range of the baseline's test accuracy over its seeds; a single-seed difference inside it
    is not an effect), and whether each side learned the task in every seed (`base_learned`, `learned`: run_status;
    a difference between two runs that both did not learn is no effect of the setting), whether the two trained
    identically in every seed (`identical`: same losses and accuracies every epoch) and whether the data has no
    pad tokens (`pad_free`) and the change touches pad fields only (`pad_only`). This traces a gap between the
    paper's numbers and PE-Lab's `paper` arch to one setting."""
    cols = ["setting", "variant", "base", "change", "task", "n_seeds", "base_acc", "acc", "delta", "delta_lo",
            "delta_hi", "seed_spread", "beyond_spread", "base_learned", "learned", "settled", "identical", "pad_free",
            "pad_only", "base_deposit", "deposit", "runs"]
    auth = runs[runs.setting.isin(("authors", "authors-mla"))]
    pairs = []
    for r in tuples(auth):
        base = next((b for b in BASE_VARIANTS if r.variant.startswith(f"{b}-")), None)
        b = auth[(auth.variant == base) & (auth.setting == r.setting) & (auth.task == r.task) & (auth.seed == r.seed)]
        if base is None or b.empty:
            continue
        b = b.iloc[0]
        cfg = store.get(r.run_id).config
        change = config_changes(store.get(b.run_id).config, cfg)
        pairs.append({"setting": r.setting, "variant": r.variant, "base": base, "task": r.task, "seed": r.seed,
                      "change": "; ".join(f"{k}: {json_value(v0)} -> {json_value(v1)}"
                                          for k, (v0, v1) in change.items()),
                      "base_acc": b.test_acc, "acc": r.test_acc, "runs": [b.run_id, r.run_id],
                      "base_learned": bool(b.learned), "learned": bool(r.learned),
                      "settled": _row_settled(b) and _row_settled(r),
                      "identical": _same_training(store, b.run_id, r.run_id),
                      "pad_free": not _has_pads(cfg["task"]), "pad_only": set(change) <= set(PAD_FIELDS),
                      "base_deposit": _deposit_heads(store, b.run_id, r.seed),
                      "deposit": _deposit_heads(store, r.run_id, r.seed)})
    if not pairs:
        return pd.DataFrame(columns=cols)
    rows = []
    for (setting, variant, base, change, task), g in pd.DataFrame(pairs).groupby(
            ["setting", "variant", "base", "change", "task"], sort=False):
        mean, lo, hi, n = mean_ci(g["acc"] - g["base_acc"])
        seeds = auth[(auth.variant == base) & (auth.setting == setting) & (auth.task == task)].test_acc
        spread = float(seeds.max() - seeds.min()) if len(seeds) >= 2 else np.nan
        rows.append({"setting": setting, "variant": variant, "base": base, "change": change, "task": task,
                     "n_seeds": n, "base_acc": float(g["base_acc"].mean()), "acc": float(g["acc"].mean()),
                     "delta": mean, "delta_lo": lo, "delta_hi": hi, "seed_spread": spread,
                     "beyond_spread": bool(abs(mean) > spread) if np.isfinite(spread) else None,
                     "base_learned": bool(g["base_learned"].all()), "learned": bool(g["learned"].all()),
                     "settled": bool(g["settled"].all()),
                     "identical": bool(g["identical"].all()), "pad_free": bool(g["pad_free"].all()),
                     "pad_only": bool(g["pad_only"].all()),
                     "base_deposit": "; ".join(g["base_deposit"]), "deposit": "; ".join(g["deposit"]),
                     "runs": [x for rr in g["runs"] for x in rr]})
    return pd.DataFrame(rows, columns=cols).sort_values(["setting", "base", "task", "variant"], ignore_index=True)


def _same_training(store, a: str, b: str) -> bool:
    """Whether runs `a` and `b` have the same losses and accuracies in every epoch."""
    cols = ["epoch", "train_loss", "test_loss", "test_acc"]
    ma, mb = (store.get(r).metrics() for r in (a, b))
    return (len(ma) > 0 and all(c in ma and c in mb for c in cols) and len(ma) == len(mb)
            and ma[cols].reset_index(drop=True).equals(mb[cols].reset_index(drop=True)))


def _has_pads(task_cfg: dict[str, Any]) -> bool:
    """Whether a run's data has pad tokens: Task 2 has `pads_per_example` in every example; Task 1's lengths vary
    (it has no fixed count, and pads)."""
    from synthetic_tasks import spec_of_task

    return getattr(spec_of_task(task_cfg), "pads_per_example", None) != 0


def one_setting_effect(r) -> str:
    """What a row of `one_setting` can show: no effect where both runs trained identically (a pad setting on data
    without pads cannot act), nothing where neither run learned the task, else whether its difference is within
    or beyond the baseline's seed spread (a single-seed difference within it is no effect)."""
    if getattr(r, "identical", False):
        why = (" (it has no pad tokens: every example fills seq_len, so a pad setting cannot act)"
               if getattr(r, "pad_free", False) and getattr(r, "pad_only", False) else "")
        return f"identical losses and accuracies in every epoch: no effect on this data{why}"
    if not r.base_learned and not r.learned:
        return "neither run learned the task: no effect to read"
    if not getattr(r, "settled", True):
        return ("a run of the pair had not settled (its test accuracy moved >= 1 point over its last half of "
                "training): a difference between runs still learning is no effect to read")
    if r.beyond_spread is None or (isinstance(r.beyond_spread, float) and np.isnan(r.beyond_spread)):
        return "no seed spread measured"
    return (f"{'beyond' if r.beyond_spread else 'within'} the baseline's seed spread ({100 * r.seed_spread:.2f} "
            "points)")
