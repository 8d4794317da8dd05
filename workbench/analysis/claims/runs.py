"""The run table and Table 1: one row per finished run (setting, variant, training and data seed, accuracies, what
the run can show by the registered status rules), Table 1 beside the paper's numbers, and which runs are the seed
study's."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from workbench.store.run import recorded_numerics

from ..baselines import run_baselines
from ..experiments import PAPER_TABLE1, _kwargs, final_metrics
from ..settings import SETTINGS, setting_of
from .registry import load_registry
from .status import run_status, wilson


STATUS_COLUMNS = ("learned", "settled", "still_learning", "diverged", "ceiling", "reference", "status", "why")


TASKS = ("trigger-distance", "trigger-count")


BASE = "repro"  # the preset of the reproduction's main tables; the scale ladder's other rungs are compared to it


def base_preset(runs: pd.DataFrame) -> str:
    """The preset whose runs make the main tables (Table 1, the claims): `repro` when the runs have any, else
    their most common preset (a store of `smoke` or `cpu` runs gets a comparison of those)."""
    presets = runs.preset.dropna() if "preset" in runs else pd.Series([], dtype=object)
    if (presets == BASE).any() or presets.empty:
        return BASE
    return str(presets.value_counts().index[0])


def cpu_time_share(info: dict) -> float:
    """A run's training CPU time in seconds. A run trained in a pack of K (`train/packed.py`) records its share, the
    pack process's CPU time / K; runs packed before that rule (no `pack_cpu_time_s` in run.json) recorded the whole
    process's time, so theirs is divided by K here: a total over runs counts each process once."""
    cpu = float(info.get("cpu_time_s") or np.nan)
    packed = int(info.get("packed") or 1)
    return cpu / packed if packed > 1 and "pack_cpu_time_s" not in info else cpu


def status_of_run(run, metrics: pd.DataFrame | None = None) -> dict:
    """What one run can show by the registered rules (`status.run_status` of its metrics so far, against its test
    split's size, chance and length-only levels from `run_baselines`): {n_test, chance, length_only, *STATUS_COLUMNS};
    without an epoch of metrics the status columns are False / NaN / absent. The run table and the dashboard's run
    labels read runs through this one function. `metrics`: the run's, when already read."""
    m = run.metrics() if metrics is None else metrics
    bl = run_baselines(run)
    test_bl = bl[bl["split"] == "test"].iloc[0] if bl is not None else {}
    n_classes = int(run.config["model"].get("n_classes") or 2)
    n_test = int(test_bl.get("n", 0)) or None
    length_only = float(test_bl.get("length_only", np.nan))
    st = run_status(m, n_classes, length_only, n_test=n_test) if len(m) else {}
    return {"n_test": n_test, "chance": 1.0 / n_classes, "length_only": length_only,
            **{k: st.get(k, np.nan if k == "reference" else False) for k in STATUS_COLUMNS}}


def reading_of(run) -> dict | None:
    """`status_of_run(run)` (status, why ...) of a run with an epoch of metrics, None for one without or that cannot
    be read (every surface names damaged runs on its own)."""
    try:
        st = status_of_run(run)
    except Exception:
        return None
    return st if st.get("status") else None


def index_statuses(store, index: pd.DataFrame, memo: dict | None = None) -> list[str | None]:
    """`status_of_run(...)["status"]` of each run of a store index (`RunStore.query` rows: id, path, epoch, status,
    updated, test_acc), None for a run without an epoch or that cannot be read. `memo` (a dict kept by the caller:
    the dashboard's) holds each run folder's status while its index state (updated, epoch, status, test accuracy)
    stays the same, so a second call reads only the runs that changed."""
    memo = {} if memo is None else memo
    out = []
    for r in index.to_dict("records"):
        epoch = r.get("epoch")
        if not isinstance(epoch, (int, float)) or not epoch > 0 or r.get("status") == "corrupt":
            out.append(None)
            continue
        key, slot = (r.get("updated"), epoch, r.get("status"), r.get("test_acc")), r.get("path") or r["id"]
        hit = memo.get(slot)
        if hit is None or hit[0] != key:
            try:
                reading = reading_of(store.get(r["id"]))
            except Exception:  # an id the store cannot resolve: no status, as for a run that cannot be read
                reading = None
            hit = memo[slot] = (key, reading and reading["status"])
        out.append(hit[1])
    return out


def resumed_otherwise(info: dict, epochs: int) -> str | None:
    """What the sessions of a resumed run ran otherwise (run.json `sessions`, each kept session's settings from the
    epoch it started at): "`code_version` 39f4b718 (epochs 1-2) -> a0938f10 (3-16)"; a run from before `sessions`:
    its `resumed_settings` ({field: [first session's, last resume's]}), "`code_version` a509157 -> 2ca9d57"; None
    when no session ran otherwise."""
    sessions = info.get("sessions") or []
    if len(sessions) < 2:
        return "; ".join(f"`{k}` {v[0]} -> {v[-1]}" for k, v in (info.get("resumed_settings") or {}).items()) or None
    ends = [s["from_epoch"] for s in sessions[1:]] + [epochs]
    spans = [f"{s['from_epoch'] + 1}-{end}" for s, end in zip(sessions, ends)]
    fields = [k for k in sessions[0] if k != "from_epoch" and len({str(s.get(k)) for s in sessions}) > 1]
    return "; ".join(f"`{k}` " + " -> ".join(f"{s.get(k)} ({'epochs ' if i == 0 else ''}{span})"
                                             for i, (s, span) in enumerate(zip(sessions, spans)))
                     for k in fields) or None


def run_table(store=None, runs=None) -> pd.DataFrame:
    """One row per finished run: id, setting, variant (tag or scheme), scheme, task, seed, preset, the final and
    epoch-1 test accuracy, the mean test accuracy over epochs (area under the learning curve), train accuracy
    (running mean; `train_acc_eval` measured after the epoch where recorded), epochs, wall and CPU time (a packed
    run's share: `cpu_time_share`), threads, code version (and `code_diff`: whether it ships the uncommitted diff it
    was trained with), the test set's size, chance and length-only levels, and
    what the run can show (`run_status.run_status`: learned, still_learning, diverged, ceiling, reference, status,
    why).
    From a store: its finished runs that read; `.attrs["corrupt"]` holds {run id: why} for those that cannot be
    read (`workbench.store.finished_runs`)."""
    corrupt: dict[str, str] = {}
    if runs is None:
        from workbench.store import finished_runs

        runs, corrupt = finished_runs(store)
    rows = []
    for run in runs:
        cfg, info = run.config, run.info
        m = run.metrics()
        fm = final_metrics(run)
        kw = _kwargs(run)
        st = status_of_run(run, m)
        numerics = recorded_numerics(info) if (info.get("device") or "cpu") == "cpu" else {}
        rows.append({
            "run_id": run.id, "setting": setting_of(cfg), "variant": cfg.get("tag") or cfg["model"]["scheme"],
            "scheme": cfg["model"]["scheme"], "partial": bool(kw.get("rope_heads") is not None
                                                              or kw.get("rope_layers") is not None),
            "task": cfg["task"]["task"], "seed": int(cfg["train"]["seed"]), "data_seed": _data_seed(cfg),
            "preset": cfg.get("preset"), "started": info.get("started") or info.get("created"),
            "test_acc": fm["test_acc"], "train_acc": fm["train_acc"],
            "test_acc_epoch1": float(m["test_acc"].iloc[0]) if len(m) else np.nan,
            "test_acc_auc": float(m["test_acc"].mean()) if len(m) else np.nan,
            "epochs": int(len(m)), "wall_time_s": float(info.get("wall_time_s") or np.nan),
            "cpu_time_s": cpu_time_share(info), "threads": info.get("threads"),
            "code_version": info.get("code_version"), "code_diff": run.has_code_diff,
            "cpu": (info.get("machine") or {}).get("cpu"),
            # the GPU a run trained on (run.json `gpu`, recorded since 2026-11-27); None for a CPU run
            "gpu": (info.get("gpu") or "a GPU, not named") if (info.get("device") or "cpu") != "cpu" else None,
            "simd": numerics.get("cpu_capability"), "cpu_vendor": numerics.get("cpu_vendor"),
            "train_acc_eval": float(m["train_acc_eval"].iloc[-1]) if "train_acc_eval" in m and len(m) else np.nan,
            "resumed_otherwise": resumed_otherwise(info, len(m)),
            **st,
        })
    cols = ["run_id", "setting", "variant", "scheme", "partial", "task", "seed", "data_seed", "preset", "started",
            "test_acc", "train_acc",
            "test_acc_epoch1", "test_acc_auc", "epochs", "wall_time_s", "cpu_time_s", "threads", "code_version",
            "code_diff", "cpu",
            "gpu", "simd", "cpu_vendor", "train_acc_eval", "resumed_otherwise", "n_test", "chance", "length_only",
            *STATUS_COLUMNS]
    df = pd.DataFrame(rows, columns=cols).sort_values(["setting", "variant", "task", "seed"], ignore_index=True)
    df.attrs["corrupt"] = corrupt
    return df


DEFAULT_DATA_SEED = 42  # task.seed of every run before the seed study (the task presets' default)


def _data_seed(cfg: dict) -> int:
    """The run's data seed: config task.seed (the draw of its whole dataset), the presets' 42 where absent."""
    v = (cfg.get("task") or {}).get("seed")
    return int(v) if v is not None else DEFAULT_DATA_SEED


def seeds_text(sub: pd.DataFrame) -> str:
    """'3 training seeds x 1 data seed (42)': what a row rests on (a data seed is a new draw of the dataset);
    '16 runs of 9 training seeds x 2 data seeds (43, 44)' where its runs are not every pair of them."""
    if sub is None or len(sub) == 0:
        return "no run"
    ds = sorted(set(sub["data_seed"])) if "data_seed" in sub else [DEFAULT_DATA_SEED]
    nt = sub["seed"].nunique()
    runs = f"{len(sub)} runs of " if len(sub) != nt * len(ds) else ""  # not every training x data seed pair
    return (f"{runs}{nt} training seed{'s' if nt != 1 else ''} x {len(ds)} data seed{'s' if len(ds) != 1 else ''} "
            f"({', '.join(str(d) for d in ds)})")


def _rests(counted: pd.DataFrame, sub: pd.DataFrame) -> str:
    """What a row rests on: its counted runs' seeds, or none counted of the runs it read."""
    if len(counted):
        return seeds_text(counted)
    return f"no counted run (of {seeds_text(sub)})" if len(sub) else "no run"


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n): Student-t interval of the mean over seeds (lo = hi = NaN for n < 2)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan, np.nan, 0
    if len(v) == 1:
        return float(v[0]), np.nan, np.nan, 1
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half), len(v)


def pct(x) -> str:
    """A fraction as a percentage with 2 decimals, no unit (a table cell): 0.9922 -> '99.22'; '–' when missing."""
    return "–" if x is None or not np.isfinite(x) else f"{100 * x:.2f}"


def accuracy_text(r) -> str:
    """A Table 1 cell (mean, lo, hi, n_seeds of `accuracy_ci`) in %: '99.22 (98.42-99.75, 3 seeds)' (the seeds'
    range) or '99.93 [99.83, 99.97] (1 seed)' (Wilson 95 %); '–' for a missing number."""
    if r["n_seeds"] < 2:
        return f"{pct(r['mean'])} [{pct(r['lo'])}, {pct(r['hi'])}] (1 seed)"
    return f"{pct(r['mean'])} ({pct(r['lo'])}-{pct(r['hi'])}, {r['n_seeds']} seeds)"


def accuracy_ci(values, n_test: int | None = None) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n seeds) of test accuracies: with >= 2 seeds, lo and hi are the smallest and largest seed
    (a t interval from 2-3 seeds is wider than the range an accuracy can take, or collapses at 100 %); with one
    seed, the Wilson interval on its `n_test` test examples (NaN when unknown)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan, np.nan, 0
    if len(v) == 1:
        return (float(v[0]), *wilson(float(v[0]), n_test or 0), 1)
    return float(v.mean()), float(v.min()), float(v.max()), len(v)


def _n_test(sub: pd.DataFrame) -> int | None:
    n = sub["n_test"].dropna() if "n_test" in sub else []
    return int(n.iloc[0]) if len(n) else None


def status_counts(statuses) -> str:
    """'2 ceiling; 1 ceiling, not settled': how many runs can show what (run_status), most first; joined by ';'
    (a status may hold a comma)."""
    return "; ".join(f"{n} {k}" for k, n in pd.Series(list(statuses), dtype=object).value_counts().items())


def _statuses(sub: pd.DataFrame) -> str:
    return status_counts(sub["status"]) if "status" in sub else ""


def table1(runs: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 1 (MLA, RoPE, NoPE; test accuracy) next to ours: one row per (setting, scheme, task):
    mean over seeds, lo-hi (`accuracy_ci`: the seeds' range, or a single run's Wilson interval), the per-seed
    values (text, in %), what the runs can show (`status`), and the runs' mean chance and length-only levels (the
    reference marks of the Table 1 figure)."""
    rows = []
    for setting in SETTINGS:
        for scheme in ("mla", "rope", "nope"):
            for task in TASKS:
                sub = runs[(runs.setting == setting) & (runs.variant == scheme) & (runs.task == task)]
                mean, lo, hi, n = accuracy_ci(sub["test_acc"], _n_test(sub))
                if n == 0:
                    continue
                rows.append({"setting": setting, "scheme": scheme, "task": task,
                             "paper": PAPER_TABLE1.get((scheme, task), np.nan), "mean": mean, "lo": lo, "hi": hi,
                             "n_seeds": n, "rests_on": seeds_text(sub),
                             "seeds": ", ".join(f"{100 * a:.2f}" for a in sub["test_acc"]),  # in %
                             "status": _statuses(sub), "chance": _mean(sub, "chance"),
                             "length_only": _mean(sub, "length_only"), "runs": list(sub["run_id"])})
    return pd.DataFrame(rows, columns=["setting", "scheme", "task", "paper", "mean", "lo", "hi", "n_seeds", "rests_on",
                                       "seeds",
                                       "status", "chance", "length_only", "runs"])


def _mean(sub: pd.DataFrame, col: str) -> float:
    v = sub[col].dropna() if col in sub else []
    return float(np.mean(v)) if len(v) else np.nan


def is_study(runs: pd.DataFrame) -> pd.Series:
    """Whether each run belongs to the registered seed study (`[study]` and its tiers: any tier's training or data
    seeds), whose runs are judged by the study's readouts alone and never pooled with the runs trained before the
    registration (seeds 42-44, data seed 42)."""
    tiers = load_registry().tiers.values()
    seeds = {s for t in tiers for s in t.get("train_seeds", [])}  # every tier's (today all within tier 1's 45-54)
    data = {d for t in tiers for d in t.get("data_seeds", [])}
    ds = runs["data_seed"] if "data_seed" in runs else pd.Series(DEFAULT_DATA_SEED, index=runs.index)
    return runs["seed"].isin(seeds) | ds.isin(data)
