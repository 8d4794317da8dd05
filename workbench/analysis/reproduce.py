"""Judging a re-training of a shipped run on a machine whose numerics differ (`workbench verify`).

Where the recorded numerics (`workbench.store.run.numerics_identity`: torch, SIMD level, CPU vendor, BLAS / MKL /
oneDNN build, threads) differ, floats differ from the first steps and a re-run cannot be bit-identical. It is
then judged by ONE rule, `RULE`:

    the re-run's final test accuracy lies within the shipped seeds' range of the same setting (the shipped runs
    whose config differs only in its seeds), widened to the Wilson 95 % interval of the shipped run's accuracy on
    its n test examples; and the re-run has the shipped run's status, learned / did not learn (`run_status`).

    verdict = rerun_verdict(shipped_store, shipped_run, rerun)   # {"ok", "lo", "hi", "seeds", ...}
"""
from __future__ import annotations

import json
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
