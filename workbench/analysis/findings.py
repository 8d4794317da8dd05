"""The reproduction's answers as tidy tables for pictures (Findings page, report, notebooks), from the claims'
public tables (`workbench.analysis.claims`) and the runs' stored deposit tables; no I/O but reads.

    m = verdict_matrix(bc)             one row per (claim, setting, rung): verdict, seeds, evidence, runs
    d = deposit_map(store, runs)       one row per run: where its largest single-head deposit falls, its drop
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .common import tuples

MATRIX_COLUMNS = ["claim", "setting", "rung", "verdict", "n_seeds", "evidence", "runs", "claim_no"]


def _seeds(runs_all: pd.DataFrame, run_ids) -> int:
    """How many seeds the runs behind a verdict span."""
    seed_of = dict(zip(runs_all.run_id, runs_all.seed))
    return len({seed_of[r] for r in run_ids if r in seed_of})


def verdict_matrix(bc) -> pd.DataFrame:
    """Every claim's verdict per (setting, rung): at the base preset (`bc.base`, `claims.BaseClaims`) on every seed,
    at the ladder's other rungs seed 42's verdict (`bc.ladder`, one seed) or, where the rung was run with more seeds,
    the verdict on all of them (`bc.every`, judged once by `base_claims`: the rows `bc.seeded` names; the seed
    study's runs left out: they are judged by the study alone). Seed 42's verdict alone is no test: a cell resting on it reads "inconclusive (one seed)", what seed 42
    shows (`seed_verdict`) in its evidence. Columns: claim, setting, rung, verdict, n_seeds (the seeds of the runs
    behind it), evidence, runs, claim_no (the base row's index in `bc.claims`; -1 at other rungs)."""
    from .claims import ONE_SEED, seed_verdict

    runs_all = bc.runs_all
    rows = [{"claim": r.claim, "setting": r.setting, "rung": bc.base, "verdict": r.verdict,
             "n_seeds": _seeds(runs_all, r.runs), "evidence": r.evidence, "runs": list(r.runs), "claim_no": i}
            for i, r in bc.claims.iterrows()]
    seeded = {(r.rung, r.claim, r.setting) for r in tuples(bc.seeded)}
    full = {(r.rung, r.claim, r.setting): r for r in tuples(bc.every)}
    for r in tuples(bc.ladder):
        if r.rung == bc.base or r.verdict == "pending":
            continue
        key = (r.rung, r.claim, r.setting)
        if key in seeded and key in full:
            e = full[key]
            rows.append({"claim": r.claim, "setting": r.setting, "rung": r.rung, "verdict": e.verdict,
                         "n_seeds": _seeds(runs_all, e.runs), "evidence": e.evidence, "runs": list(e.runs),
                         "claim_no": -1})
        else:
            one = r.verdict in ONE_SEED  # a test's outcome, read from one seed
            rows.append({"claim": r.claim, "setting": r.setting, "rung": r.rung, "n_seeds": 1, "runs": [],
                         "verdict": "inconclusive (one seed)" if one else r.verdict, "claim_no": -1,
                         "evidence": f"seed 42 alone{f' ({seed_verdict(r.verdict)})' if one else ''}: {r.evidence}"})
    m = pd.DataFrame(rows, columns=MATRIX_COLUMNS)
    # a setting the store has no run of (results/paper: tier 1 trains the authors' settings only) would be a column
    # of "pending" cells: left out, unless no setting has a run
    ran = set(m.loc[m["n_seeds"] > 0, "setting"])
    return m[m["setting"].isin(ran)] if ran else m


DEPOSIT_COLUMNS = ["scheme", "setting", "task", "seed", "layer", "head", "drop", "n_layers", "learned", "status",
                   "run_id"]
SCHEME_ORDER = ("rope", "mla", "nope")  # Table 1's schemes first, then the others by name


def deposit_map(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Where each run's largest single-head deposit falls (the accuracy rows of its stored `deposit` table: the
    deposit head with the largest zero-ablation drop): one row per run of a plain scheme (untagged, or tagged as
    Table 1's variants: `settings.plain_variant`; not partial RoPE; `scheme` is that variant) of `runs`
    (`claims.run_table`, one preset) with a deposit table. `layer` / `head` / `drop` are NaN when the run has no
    single-head deposit. Ordered Table 1's schemes first, settings in `SETTINGS` order, Task 1 first."""
    from .claims import largest_deposit
    from .settings import SETTINGS, plain_variant

    plain = runs[plain_variant(runs) & ~runs.partial.astype(bool)]
    rows = []
    for r in tuples(plain):
        run = store.get(r.run_id)
        if "deposit" not in run.tables():
            continue
        dep = run.load_table("deposit")
        top = largest_deposit(dep[dep["metric"] == "accuracy"])
        rows.append({"scheme": r.variant, "setting": r.setting, "task": r.task, "seed": int(r.seed),
                     "layer": float(top["layer"]) if top is not None else np.nan,
                     "head": float(top["top_head"]) if top is not None else np.nan,
                     "drop": float(top["top_delta"]) if top is not None else np.nan,
                     "n_layers": int(run.config["model"]["n_layers"]), "learned": bool(r.learned),
                     "status": r.status, "run_id": r.run_id})
    out = pd.DataFrame(rows, columns=DEPOSIT_COLUMNS)
    if out.empty:
        return out
    rank = {s: i for i, s in enumerate(SCHEME_ORDER)}
    order = {s: i for i, s in enumerate(SETTINGS)}
    key = pd.DataFrame({"a": out.scheme.map(lambda s: rank.get(s, len(rank))), "b": out.scheme,
                        "c": out.setting.map(lambda s: order.get(s, len(order))),
                        "d": (out.task != "trigger-distance").astype(int), "e": out.seed})
    return out.loc[key.sort_values(list("abcde")).index].reset_index(drop=True)


class _MemoRun:
    """A run whose tables, table list and metrics are read once (copies handed out: callers may add columns)."""

    def __init__(self, run):
        self._run, self._tables, self._list, self._metrics = run, {}, None, None

    def __getattr__(self, name):
        return getattr(self._run, name)

    def tables(self):
        if self._list is None:
            self._list = list(self._run.tables())
        return list(self._list)

    def has_table(self, name: str) -> bool:
        return name in self.tables()

    def load_table(self, name: str):
        if name not in self._tables:
            self._tables[name] = self._run.load_table(name)
        return self._tables[name].copy()

    def metrics(self):
        if self._metrics is None:
            self._metrics = self._run.metrics()
        return self._metrics.copy()


class MemoStore:
    """A read-only view of a store that reads each run's tables once: the Findings tables read the same deposit
    tables many times over (every claim, every rung); use it for one computation, then drop it."""

    def __init__(self, store):
        self._store, self._runs = store, {}

    def __getattr__(self, name):
        return getattr(self._store, name)

    def get(self, run_id: str):
        if run_id not in self._runs:
            self._runs[run_id] = _MemoRun(self._store.get(run_id))
        return self._runs[run_id]
