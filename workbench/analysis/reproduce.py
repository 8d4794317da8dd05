"""Judging a re-training of a shipped run on a machine whose numerics differ (`workbench verify`).

Where the recorded numerics (`workbench.store.run.numerics_identity`: torch, SIMD level, CPU vendor, BLAS / MKL /
oneDNN build, threads) differ, floats differ from the first steps and a re-run cannot be bit-identical. It is
then judged by ONE rule, `RULE`:

    the re-run's final test accuracy lies within the shipped seeds' range of the same setting (the shipped runs
    whose config differs only in its seeds), widened to the Wilson 95 % interval of the shipped run's accuracy on
    its n test examples; and the re-run has the shipped run's status, learned / did not learn (`run_status`).

    verdict = rerun_verdict(shipped_store, shipped_run, rerun)   # {"ok", "lo", "hi", "seeds", ...}

The shipped analysis tables (no weights are shipped) are re-checked from the re-training's weights:
`recompute_tables` runs the suite `workbench ship` ran, in memory, with the parameters the shipped tables record
(bootstrap, test subsample, a head summary's thresholds and dla margin) on the thread count they were made on (the
probes' L-BFGS sums in another order on another count); `table_agreement` compares at the shipped precision
(float32).
A table made by code without a change of its analysis's numbers (`CHANGES`: by git ancestry, else by date) is
compared, not judged (`made_before`);
`stale_tables` lists them, and `workbench verify --refresh` ships the recomputed ones in their place where the
re-training's metrics equal the shipped ones at every epoch (`refresh_record` says what, when and why).
"""
from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

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
SHIP_PARAMS = {"n_boot": 1000, "max_examples": 1000, "seed": 0}  # `workbench ship`'s defaults
HEAD_SUMMARY_PARAMS = ("min_delta", "min_effect", "min_selectivity", "min_dla", "min_agree")  # stored per row
DLA_MEASURE_BEFORE = "mean"  # a head summary without a `dla_measure` column (before f041229) voted on this margin


class Change(NamedTuple):
    """An analysis whose numbers changed on the same weights: tables made before `landed` came from the old code,
    of the runs `applies` names (a key of `APPLIES`; None: every run)."""
    landed: str  # ISO time of the commit
    commit: str
    what: str
    applies: str | None = None


def _pads_attended(config: dict[str, Any]) -> bool:
    """The model's pads are not inert (`ModelConfig.pads_are_inert`): attended or pooled, the authors' script."""
    from workbench.model import ModelConfig
    from workbench.store import with_later_defaults

    model = with_later_defaults(config).get("model")
    return bool(model) and not ModelConfig.from_dict(model).pads_are_inert


def _filler_triggers(config: dict[str, Any]) -> bool:
    """Task 1 whose filler may hold the trigger words (`filler_includes_triggers`, the authors' data)."""
    from synthetic_tasks import spec_of_task

    task = config.get("task") or {}
    return task.get("task") == "trigger-distance" and bool(spec_of_task(task).filler_includes_triggers)


def _vocab_outputs(config: dict[str, Any]) -> bool:
    """The output layer has vocab_size outputs, not n_classes (`unembed_vocab`, the authors' script)."""
    return bool((config.get("model") or {}).get("unembed_vocab"))


APPLIES = {"pads_attended": _pads_attended, "filler_triggers": _filler_triggers, "vocab_outputs": _vocab_outputs}
"""Change.applies -> whether a run's config is one whose tables the change moved"""

_FIX = "2026-12-05T18:02:08+00:00", "9c4aa73"  # one commit fixed four analyses of the authors' settings
_PADS = ("where the pads are not inert (the authors' transformer script attends and pools them), patching's 'all' "
         "and 'non_trigger' positions include the pads, which carry part of the difference (the last layer's "
         "stream read 0.50-0.55 at 'all', not 1, in the shipped authors' Task 1 RoPE runs)")


CHANGES = {  # table -> the changes of its numbers, oldest first
    "distance_bias": (Change("2026-11-29T05:33:12+00:00", "ad1275b",
                             "the histogram's shared bin edges: no longer stretched by one extreme head "
                             "(`shared_edges`), so runs with such a head got narrower bins (49 of the 205 runs "
                             "shipped before it; measured on t2-mla-repro-s42-901034: the counts of 1,730 of 3,840 "
                             "bins moved)"),),
    "patching": (Change("2026-11-25T02:55:10+00:00", "eccf8f7",
                        "patching's effect where the counterfactual moves nothing (LD_cf = LD_clean, e.g. NoPE on "
                        "Task 1): NaN with a note instead of a ratio over a rounding-size denominator (measured on "
                        "t1-nope-repro-s42-9a509a: shipped effects up to 3e5, every vote no)"),),
    "probes": (Change("2026-11-25T03:10:39+00:00", "6a3fc22",
                      "the label probes' solver: a batched L-BFGS in torch replaced scikit-learn's LogisticRegression "
                      "(the same objective; measured on t2-rope-repro-s42-333ab3, scores up to 0.015 apart)"),
               Change(*_FIX, "label_head reads each head's z at the second trigger of the pair whose distance is "
                             "the label (`common.trigger_pair`), not at the row's first w2: the authors' filler "
                             "holds trigger words (13.7 % of t1-rope-repro-s42-40a0c6's test rows read elsewhere)",
                      "filler_triggers")),
    "trigger_attention": (Change(*_FIX, "t2_to_t1 and t1_to_t2 read the pair whose distance is the label (the "
                                        "authors' filler holds trigger words: 14.0 % of t1-rope-repro-s42-40a0c6's "
                                        "test rows read another pair)", "filler_triggers"),
                          Change(*_FIX, "the uniform reference counts the keys the model attends, pads included "
                                        "where they are not masked (a uniformly attending head read 0.083 against "
                                        "a reference of 0.137 over the word keys)", "pads_attended")),
    "dla": (Change(*_FIX, "dla_vs_mean subtracts the mean over the n_classes classes, not over all vocab_size "
                          "outputs (`unembed_vocab`: most are never a label)", "vocab_outputs"),),
    "self_repair": (Change(*_FIX, "the margin measure subtracts the mean over the n_classes classes, not over all "
                                  "vocab_size outputs (`unembed_vocab`)", "vocab_outputs"),),
    "attribution": (Change(*_FIX, _PADS, "pads_attended"),),
    "qkv": (Change(*_FIX, _PADS, "pads_attended"),),
    "edges": (Change(*_FIX, _PADS, "pads_attended"),),
}
CHANGES["patching"] += (Change(*_FIX, _PADS, "pads_attended"),)
SOLVER_CHANGE = CHANGES["probes"][0]  # the probes' solver (COMPARISON's decodable layers say which runs predate it)


def recheckable() -> tuple[str, ...]:
    """Every table `workbench ship`'s suite (`suite.run_suite`) makes: each ablation mode and its deposit table,
    then every other analysis (the head summary joins the run's per-head tables)."""
    from . import ANALYSES
    from .ablation import MODES, table_name

    abl = [table_name(m) for m in MODES]
    return tuple([n for a in abl for n in (a, "deposit" + a[len("ablation"):])]
                 + [k for k in ANALYSES if not k.startswith(("ablation", "deposit"))])


def recheck_names(text: str) -> list[str]:
    """`--tables` as a list of `recheckable` names ("all": every one; "none": []); ValueError naming the choices
    otherwise."""
    names, known = [t.strip() for t in text.split(",") if t.strip()], recheckable()
    if names == ["none"]:
        return []
    if names == ["all"]:
        return list(known)
    bad = [t for t in names if t not in known]
    if bad or not names:
        raise ValueError(f"--tables {text!r}: {', '.join(map(repr, bad)) or 'nothing'} cannot be re-checked; pick "
                         f"from {', '.join(known)} (comma-separated), 'all', or 'none' for the metrics only")
    return names


def _needs(name: str) -> tuple[str, ...]:
    """The tables `name` is made from: a deposit table from its ablation, the head summary from the per-head
    tables it joins."""
    from .head_summary import SOURCES

    if name.startswith("deposit"):
        return ("ablation" + name[len("deposit"):],)
    return SOURCES if name == "head_summary" else ()


def _analysed(shipped_run, name: str) -> str:
    """When table `name` was made, as its provenance records it (`store.run.table_provenance`), else when the run
    was shipped (tables are made before a run is shipped)."""
    made = shipped_run.provenance_of(name) or {}
    return str(made.get("analysed") or shipped_run.info.get("shipped") or shipped_run.info.get("finished") or "")


def _lacks(shipped_run, name: str, change: Change) -> bool:
    """Whether table `name` of `shipped_run` was made by code without `change`: by git ancestry of the code that made
    it (its provenance's `code_version`, else the run's: a table without provenance was made when the run was
    shipped, by the checkout that trained it) where git can tell (`store.runstore.contains_commit`), else by the
    clock (`_analysed` before the change landed). The clock alone missed t1-tapa-repro-s42-ea0e93: shipped after
    the probes' solver changed (6a3fc22), from b523926, a branch without it (a bisection re-made its probes there)."""
    from workbench.store.runstore import contains_commit

    code = (shipped_run.provenance_of(name) or {}).get("code_version") or shipped_run.info.get("code_version")
    has = contains_commit(code, change.commit)
    if has is not None:
        return not has
    when = _analysed(shipped_run, name)
    return bool(when) and when < change.landed


def made_before(name: str, shipped_run) -> list[tuple[str, Change]]:
    """[(table, change)] of the changes (`CHANGES`) to table `name` of `shipped_run`, or to a table it is made
    from, that apply to the run (`Change.applies`) and that either table was made without (`_lacks`), oldest
    first; [] when the shipped table came from today's analyses. A joining table made before a change of a table
    it joins read that table's old numbers, even where that table was refreshed since (`verify --refresh --tables
    probes` leaves the head summary stale)."""
    have = shipped_run.tables()
    later = [(n, c) for n in (name, *_needs(name)) if n in have
             for c in CHANGES.get(n, ()) if (c.applies is None or APPLIES[c.applies](shipped_run.config))
             and (_lacks(shipped_run, name, c) or _lacks(shipped_run, n, c))]
    return sorted(later, key=lambda nc: nc[1].landed)


def stale_tables(shipped_run) -> list[str]:
    """The tables of `shipped_run` made before a registered change of their numbers, or of a table they join
    (`made_before`): what `workbench verify --refresh` recomputes and ships again."""
    return [n for n in shipped_run.tables() if made_before(n, shipped_run)]


def refresh_record(shipped_run, rerun, names: list[str], threads: int) -> dict[str, Any]:
    """What run.json's `refreshed` list records when the tables `names` of `shipped_run` are replaced by ones
    recomputed from `rerun`'s weights: when and by which code, the changes they were made before, the re-training
    (when, by which code, on which CPU; its metrics equal the shipped ones at every epoch), the thread count."""
    from workbench.store.run import now_iso
    from workbench.store.runstore import code_version

    changes = sorted({(c.landed, c.commit) for n in names for _, c in made_before(n, shipped_run)})
    info = rerun.info
    return {"refreshed": now_iso(), "code_version": code_version(), "tables": list(names),
            "changes": [commit for _, commit in changes], "threads": int(threads),
            "retrained": {"finished": info.get("finished"), "code_version": info.get("code_version"),
                          "cpu": (info.get("machine") or {}).get("cpu"),
                          "metrics": "equal to the shipped ones at every epoch (timings aside)"},
            "why": "made before their analysis changed its numbers (reproduce.CHANGES); recomputed with the "
                   "shipped parameters from the re-trained weights"}


def said_changes(name: str, changes: list[tuple[str, Change]]) -> str:
    """`made_before`'s changes in words: a table's own change with what it changed, those of a table it joins by
    their commit and table."""
    own = [f"{c.commit} ({c.landed[:10]}) changed it: {c.what}" for n, c in changes if n == name]
    joined = [f"{c.commit} ({n}, {c.landed[:10]})" for n, c in changes if n != name]
    return "; ".join(own + ([f"changes of tables it joins: {', '.join(joined)}"] if joined else []))


class _InMemory:
    """A run whose analyses save their tables in memory (`saved`, with what made each: `made`) and read only those:
    the shipped suite runs on it as on the run itself, and nothing of the run's folder is read as a table or
    written."""

    def __init__(self, run):
        self._run, self.saved, self.made = run, {}, {}

    def __getattr__(self, name):
        return getattr(self._run, name)

    def save_table(self, name, df):
        from workbench.store.run import table_provenance

        self.saved[name], self.made[name] = df, table_provenance()

    def tables(self):
        return list(self.saved)

    def has_table(self, name):
        return name in self.saved

    def load_table(self, name):
        return self.saved[name]


def shipped_params(shipped_run) -> tuple[dict, dict[str, dict]]:
    """The parameters `shipped_run`'s tables were made with, as they record them: (the suite's `n_boot`,
    `max_examples`, `seed`: from the ablation table's provenance `parameters` (tables made since 2026-12-06), its
    `n_boot` and `n_examples` columns (the test examples it used, at most the cap it was given) over them, else
    ship's defaults; {table: its own parameters}: each other table's recorded `parameters`, and
    for a head summary without them its thresholds and dla margin from its columns, `DLA_MEASURE_BEFORE` where it
    records none)."""
    params, per_table = dict(SHIP_PARAMS), {}
    have = set(shipped_run.tables())
    recorded = {n: (shipped_run.provenance_of(n) or {}).get("parameters") for n in have}
    abl = shipped_run.load_table("ablation") if "ablation" in have else None
    if recorded.get("ablation"):
        params.update({k: recorded["ablation"][k] for k in SHIP_PARAMS if k in recorded["ablation"]})
    if abl is not None and len(abl) and {"n_boot", "n_examples"} <= set(abl.columns):  # the test examples it used
        params.update(n_boot=int(abl["n_boot"].iloc[0]), max_examples=int(abl["n_examples"].iloc[0]))
    for name, p in recorded.items():
        if p and not name.startswith(("ablation", "deposit")):  # the ablations and deposits share the suite's
            per_table[name] = {k: v for k, v in p.items() if k != "device"}  # verify picks the device
    if "head_summary" in per_table:
        return params, per_table
    hs = shipped_run.load_table("head_summary") if "head_summary" in have else None
    if hs is not None and len(hs):
        first = {k: hs[k].iloc[0] for k in (*HEAD_SUMMARY_PARAMS, "dla_measure") if k in hs}  # each in its dtype
        # a float32 threshold read back as the decimal it was written from (0.05, not 0.0500000007)
        kw = {k: float(str(v)) if isinstance(v, (float, np.floating)) else int(v)
              for k, v in first.items() if k != "dla_measure"}
        kw["dla_measure"] = str(first.get("dla_measure", DLA_MEASURE_BEFORE))
        per_table["head_summary"] = kw
    return params, per_table


def analysis_threads(shipped_run) -> int | None:
    """The torch thread count `shipped_run`'s tables were made on: as the probes table's provenance records it (the
    one analysis whose numbers follow it: the L-BFGS's float32 sums); else the count it was trained with (the grids
    analyse each run in its worker, on its training threads)."""
    made = shipped_run.provenance_of("probes") if "probes" in shipped_run.tables() else None
    threads = ((made or {}).get("numerics") or {}).get("threads") or shipped_run.info.get("threads")
    return int(threads) if threads else None


def recompute_tables(rerun, shipped_run, names, env: dict[str, str] | None = None) -> tuple[dict, dict, dict]:
    """({name: table}, parameters, {name: what made it}) of `names` computed on `rerun`'s weights by the suite
    `workbench ship` runs (`suite.run_suite`), in memory: what a table is made from recomputed first (a deposit
    table's ablation, the head summary's per-head tables as shipped), with the parameters the shipped tables record
    (`shipped_params`: each table's provenance `parameters`, else the ablation table's `n_boot` / `n_examples`
    columns and a head summary's thresholds and dla margin, else ship's defaults), on the shipped tables' torch
    thread count (`analysis_threads`; the provenance records it). A table the run cannot support is left out.
    env: computed in a child process started with it (`_recompute_held`), e.g. ATen held to the SIMD level the run
    was trained at (`train.recreate.simd_hold`): ATen reads its level once, so this process cannot change its own."""
    if env:
        return _recompute_held(rerun, shipped_run, names, env)
    import torch

    from .suite import run_suite

    params, per_table = shipped_params(shipped_run)
    have = set(shipped_run.tables())
    wanted = set(names) | {n for name in names for n in _needs(name) if n in have or n.startswith("ablation")}
    scratch = _InMemory(rerun)
    threads = analysis_threads(shipped_run) or torch.get_num_threads()
    before = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        run_suite(scratch, tables=wanted, skip_existing=False, params=per_table, **params)
    finally:
        torch.set_num_threads(before)
    done = [n for n in names if n in scratch.saved]
    return ({n: scratch.saved[n] for n in done}, dict(params, threads=int(threads)),
            {n: scratch.made[n] for n in done})


def _recompute_held(rerun, shipped_run, names, env: dict[str, str]) -> tuple[dict, dict, dict]:
    """`recompute_tables` in a child started with `env` (`_recompute_child`), its tables and their provenance
    handed back as parquet files in a temporary folder. Measured on t1-alibi-repro-long-s42 (trained at AVX2,
    re-trained bit for bit held to it on an AVX-512 machine): re-checked here its ablation and spectral tables
    differed from the shipped ones (2.4e-4, 11.5 in `cond`), held they are equal, and its probes too once OpenBLAS
    was held with ATen (1.07e-05 before; benchmarks/measured/cpu-probes-residue-2026-12-07)."""
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import pandas as pd

    from workbench.store.run import parquet_provenance

    with tempfile.TemporaryDirectory(prefix="pelab-recheck-") as d:
        cmd = [sys.executable, "-c", "from workbench.analysis.reproduce import _recompute_child; _recompute_child()",
               str(rerun.store.root), str(rerun.store.data_dir), rerun.id, str(shipped_run.store.root),
               shipped_run.id, ",".join(names), d]
        res = subprocess.run(cmd, env=os.environ | env, capture_output=True, text=True)
        if res.returncode:
            held = ", ".join(f"{k}={v}" for k, v in env.items())
            tail = " ".join(res.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"the tables' re-check held to {held} failed (exit status {res.returncode}): {tail}")
        params = json.loads((Path(d) / "params.json").read_text())
        done = params.pop("tables")
        tables = {n: pd.read_parquet(Path(d) / f"{n}.parquet") for n in done}
        return tables, params, {n: parquet_provenance(Path(d) / f"{n}.parquet") for n in done}


def _recompute_child() -> None:
    """The child of `_recompute_held` (`python -c ... OWN DATA RUN_ID SHIPPED SHIPPED_ID NAMES OUT`): the tables
    recomputed in this process (started held), written to OUT with what made each, and the parameters."""
    import sys
    from pathlib import Path

    from workbench.store import RunStore
    from workbench.store.run import parquet_bytes

    own, data, run_id, shipped, shipped_id, names, out = sys.argv[1:8]
    rerun = RunStore(own, data_dir=data).get(run_id)
    tables, params, made = recompute_tables(rerun, RunStore(shipped, readonly=True).get(shipped_id),
                                            [n for n in names.split(",") if n])
    for n, df in tables.items():
        (Path(out) / f"{n}.parquet").write_bytes(parquet_bytes(df, made[n]))
    (Path(out) / "params.json").write_text(json.dumps(dict(params, tables=list(tables))))


def as_shipped(df):
    """A table at the precision `workbench ship` stores it (`store.bundle`: float columns as float32), so what is
    read from it (a deposit sentence's rounded intervals) reads as from the shipped table."""
    from pandas.api.types import is_float_dtype

    return df.astype({c: "float32" for c in df.columns if is_float_dtype(df[c].dtype)})


def table_agreement(shipped, mine) -> dict[str, Any]:
    """How a recomputed table compares with the shipped one (shipped tables hold float32 values: `store.bundle`):
    {"equal": every shipped value equal at the shipped precision (floats rounded to float32, the rest exactly),
    "max_abs": the largest |difference| of a float column, "column": where, "added": columns today's analysis adds
    (not compared), "why": what differs}. Rows are matched by their non-float columns; `analysed_on` (the device) is
    not a value of the analysis and is left out; a shipped column the recomputed table lacks makes it differ."""
    cols = [c for c in shipped.columns if c != "analysed_on"]
    added = [c for c in mine.columns if c != "analysed_on" and c not in cols]
    lacks = [c for c in cols if c not in mine.columns]
    if lacks or len(shipped) != len(mine):
        return {"equal": False, "max_abs": math.inf, "column": None, "added": added,
                "why": f"{len(mine)} rows against the shipped {len(shipped)}"
                       + (f"; the shipped columns {', '.join(lacks)} are not recomputed" if lacks else "")}
    mine = mine[cols]
    from pandas.api.types import is_float_dtype

    floats = [c for c in cols if is_float_dtype(shipped[c].dtype) or is_float_dtype(mine[c].dtype)]
    keys = [c for c in cols if c not in floats]

    def keyed(df):  # rows in the order of their non-float values; a missing one (None or NaN) reads "<NA>"
        k = df[keys].astype(object).where(df[keys].notna(), "<NA>").astype(str)
        order = k.sort_values(keys, kind="stable").index if keys else df.index
        return df.loc[order, cols].reset_index(drop=True), k.loc[order].reset_index(drop=True)

    (a, ka), (b, kb) = keyed(shipped), keyed(mine)
    for c in keys:
        wrong = int((ka[c] != kb[c]).sum())
        if wrong:
            return {"equal": False, "max_abs": math.inf, "column": c, "added": added,
                    "why": f"{wrong} rows differ in {c}"}
    worst, where, equal = 0.0, None, True
    for c in floats:
        x = a[c].to_numpy(np.float64).astype(np.float32)
        y = b[c].to_numpy(np.float64).astype(np.float32)
        if not np.array_equal(x, y, equal_nan=True):
            equal = False
        gap = np.abs(x.astype(np.float64) - y.astype(np.float64))
        same = (x == y) | (np.isnan(x) & np.isnan(y))  # inf == inf; NaN against NaN
        gap = np.where(same, 0.0, np.where(np.isfinite(gap), gap, math.inf))  # NaN or inf against another: inf
        if len(gap) and float(gap.max()) > worst:
            worst, where = float(gap.max()), c
    why = ("every value equals the shipped table's (floats at its float32 precision)" if equal else
           f"every non-float value (a vote, a label) equal; largest |difference| {worst:.3g} in {where}")
    if added:
        why += f" (columns added since it was shipped, not compared: {', '.join(added)})"
    return {"equal": equal, "max_abs": worst, "column": where, "added": added, "why": why}
