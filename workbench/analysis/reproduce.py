"""Judging a re-training of a shipped run on a machine whose numerics differ (`workbench verify`).

Where the recorded numerics (`workbench.store.run.numerics_identity`: torch, SIMD level, CPU vendor, BLAS / MKL /
oneDNN build, threads) differ, floats differ from the first steps and a re-run cannot be bit-identical. It is
then judged by ONE rule, `RULE`:

    the re-run's final test accuracy lies within the shipped seeds' range of the same setting (the shipped runs
    whose config differs only in its seeds), widened to the Wilson 95 % interval of the shipped run's accuracy on
    its n test examples; and the re-run has the shipped run's status, learned / did not learn (`run_status`).

    verdict = rerun_verdict(shipped_store, shipped_run, rerun)   # {"ok", "lo", "hi", "seeds", ...}

The shipped analysis tables (no weights are shipped) are re-checked the same way from the re-training's weights:
`recompute_tables` runs the suite `workbench ship` ran, in memory, with the shipped table's bootstrap and test
subsample; `table_agreement` compares at the shipped precision (float32).
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

RULE = ("final test accuracy within the shipped seeds' range of the same setting, widened to the Wilson 95 % "
        "interval of the shipped run's accuracy on its n test examples, and the same status (learned / did not "
        "learn)")


def _setting_key(config: dict[str, Any]) -> str:
    """The config without its seeds (model init, training order and dropout, data) and its `tag` (a name for
    run ids, not a setting): runs with the same key are seeds of one setting."""
    from workbench.store import canonical_json, with_later_defaults

    cfg = json.loads(json.dumps(with_later_defaults(config)))
    for section in ("model", "train", "task"):
        (cfg.get(section) or {}).pop("seed", None)
    cfg.pop("tag", None)
    return canonical_json(cfg)


def rerun_verdict(shipped_store, shipped_run, rerun) -> dict[str, Any]:
    """`RULE` applied to `rerun` (a finished run with metrics) against `shipped_run` of `shipped_store`:
    {"ok", "acc", "lo", "hi", "seeds" (accuracies of the setting's shipped seeds), "n_test", "learned_shipped",
    "learned_rerun", "why"}."""
    from workbench.store import finished_runs

    from .baselines import run_baselines
    from .claims import run_status, wilson

    key = _setting_key(shipped_run.config)
    runs, _ = finished_runs(shipped_store)
    seeds = sorted(float(r.final["test_acc"]) for r in runs
                   if _setting_key(r.config) == key and r.final.get("test_acc") is not None)
    acc_shipped = float(shipped_run.final["test_acc"])
    acc = float(rerun.final["test_acc"])
    bl = run_baselines(rerun)  # the same dataset (same hash): n test examples and the length-only reference
    test = bl[bl["split"] == "test"].iloc[0] if bl is not None else {}
    n_test = int(test.get("n", 0)) or None
    length_only = float(test.get("length_only", np.nan))
    w_lo, w_hi = wilson(acc_shipped, n_test or 0)
    lo = min([*seeds, acc_shipped] + ([w_lo] if np.isfinite(w_lo) else []))
    hi = max([*seeds, acc_shipped] + ([w_hi] if np.isfinite(w_hi) else []))
    n_classes = int(shipped_run.config["model"].get("n_classes") or 2)
    learned_shipped = run_status(shipped_run.metrics(), n_classes, length_only, n_test=n_test)["learned"]
    learned_rerun = run_status(rerun.metrics(), n_classes, length_only, n_test=n_test)["learned"]
    inside = lo <= acc <= hi
    ok = bool(inside and learned_shipped == learned_rerun)
    status = {True: "learned", False: "did not learn"}
    why = (f"test accuracy {acc:.4f} {'within' if inside else 'outside'} [{lo:.4f}, {hi:.4f}] (shipped {acc_shipped:.4f}"
           f"; {len(seeds)} shipped seed(s) of this setting: {', '.join(f'{s:.4f}' for s in seeds)}; Wilson 95 % on "
           f"{n_test or '?'} test examples); status {status[learned_rerun]} (shipped: {status[learned_shipped]})")
    return {"ok": ok, "acc": acc, "lo": lo, "hi": hi, "seeds": seeds, "n_test": n_test,
            "learned_shipped": learned_shipped, "learned_rerun": learned_rerun, "why": why}


# ---- the shipped analysis tables, recomputed from a re-training's weights (`workbench verify --tables`) --------
RECHECKABLE = ("ablation", "deposit", "ablation_mean", "deposit_mean", "ablation_resample", "deposit_resample")
SHIP_PARAMS = {"n_boot": 1000, "max_examples": 1000, "seed": 0}  # `workbench ship`'s defaults


def recheck_names(text: str) -> list[str]:
    """`--tables` as a list of RECHECKABLE names ("none": []); ValueError naming the choices otherwise."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["none"]:
        return []
    bad = [t for t in names if t not in RECHECKABLE]
    if bad or not names:
        raise ValueError(f"--tables {text!r}: {', '.join(map(repr, bad)) or 'nothing'} cannot be re-checked; pick "
                         f"from {', '.join(RECHECKABLE)} (comma-separated), or 'none' for the metrics only")
    return names


class _InMemory:
    """A run whose analyses save their tables in memory (`saved`) and read only those: the shipped suite runs on
    it as on the run itself, and nothing of the run's folder is read as a table or written."""

    def __init__(self, run):
        self._run, self.saved = run, {}

    def __getattr__(self, name):
        return getattr(self._run, name)

    def save_table(self, name, df):
        self.saved[name] = df

    def tables(self):
        return list(self.saved)

    def has_table(self, name):
        return name in self.saved

    def load_table(self, name):
        return self.saved[name]


def recompute_tables(rerun, shipped_run, names) -> tuple[dict, dict]:
    """({name: table}, parameters) of `names` computed on `rerun`'s weights by the suite `workbench ship` runs
    (`suite.run_suite`), in memory: each deposit table with its own ablation recomputed first, the bootstrap and
    the test subsample as the shipped ablation table records them (`n_boot`, `n_examples`; else ship's defaults).
    A table the run cannot support is left out."""
    from .suite import run_suite

    params = dict(SHIP_PARAMS)
    abl = shipped_run.load_table("ablation") if "ablation" in shipped_run.tables() else None
    if abl is not None and len(abl) and {"n_boot", "n_examples"} <= set(abl.columns):
        params.update(n_boot=int(abl["n_boot"].iloc[0]), max_examples=int(abl["n_examples"].iloc[0]))
    wanted = set(names) | {"ablation" + n[len("deposit"):] for n in names if n.startswith("deposit")}
    scratch = _InMemory(rerun)
    run_suite(scratch, tables=wanted, skip_existing=False, **params)
    return {n: scratch.saved[n] for n in names if n in scratch.saved}, params


def as_shipped(df):
    """A table at the precision `workbench ship` stores it (`store.bundle`: float columns as float32), so what is
    read from it (a deposit sentence's rounded intervals) reads as from the shipped table."""
    from pandas.api.types import is_float_dtype

    return df.astype({c: "float32" for c in df.columns if is_float_dtype(df[c].dtype)})


def table_agreement(shipped, mine) -> dict[str, Any]:
    """How a recomputed table compares with the shipped one (shipped tables hold float32 values: `store.bundle`):
    {"equal": every value equal at the shipped precision (floats rounded to float32, the rest exactly),
    "max_abs": the largest |difference| of a float column, "column": where, "why": what differs}. Rows are matched
    by their non-float columns; `analysed_on` (the device) is not a value of the analysis and is left out."""
    cols = [c for c in shipped.columns if c != "analysed_on"]
    other = [c for c in mine.columns if c != "analysed_on"]
    if set(cols) != set(other) or len(shipped) != len(mine):
        return {"equal": False, "max_abs": math.inf, "column": None,
                "why": f"{len(mine)} rows, columns {sorted(other)} against the shipped {len(shipped)} rows, "
                       f"columns {sorted(cols)}"}
    from pandas.api.types import is_float_dtype

    floats = [c for c in cols if is_float_dtype(shipped[c].dtype) or is_float_dtype(mine[c].dtype)]
    keys = [c for c in cols if c not in floats]
    a = shipped[cols].sort_values(keys, kind="stable").reset_index(drop=True)
    b = mine[cols].sort_values(keys, kind="stable").reset_index(drop=True)
    for c in keys:
        wrong = int((a[c].astype(str) != b[c].astype(str)).sum())
        if wrong:
            return {"equal": False, "max_abs": math.inf, "column": c, "why": f"{wrong} rows differ in {c}"}
    worst, where, equal = 0.0, None, True
    for c in floats:
        x = a[c].to_numpy(np.float64).astype(np.float32)
        y = b[c].to_numpy(np.float64).astype(np.float32)
        if not np.array_equal(x, y, equal_nan=True):
            equal = False
        gap = np.abs(x.astype(np.float64) - y.astype(np.float64))
        gap = gap[np.isfinite(gap)]
        if (np.isnan(x) != np.isnan(y)).any():
            gap = np.append(gap, math.inf)
        if len(gap) and float(gap.max()) > worst:
            worst, where = float(gap.max()), c
    why = ("every value equals the shipped table's (floats at its float32 precision)" if equal else
           f"largest |difference| {worst:.3g} in {where}")
    return {"equal": equal, "max_abs": worst, "column": where, "why": why}
