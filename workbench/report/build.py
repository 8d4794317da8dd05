"""Build one self-contained HTML report (+ summary.json) for the runs a query selects.

Query syntax (`workbench report --runs QUERY`): `all`, or comma-separated `key=value` filters over the store
index (`scheme`, `task`, `arch`, `preset`, `seed`, `status`, `tag`, and `id`); `|` separates alternatives
and a repeated key adds alternatives: `scheme=rope|nope,task=trigger-distance`.

Sections: first, what differs from the paper's setup (the box of the selection's preset, `presets.disclaimer`;
one folded box per other preset it holds), then the findings and a view per setting (`overview.py`), the runs
(config summary, status, final accuracies), and for at most `overview.MAX_DETAIL_RUNS` runs: convergence curves, the
ablation atlas (heatmap, per-layer strip plot, deposit statistics with intervals per run), deposit statistics of all
runs, the cross-run experiments the selection supports, every diagnostic table stored for the runs (missing ones
listed as missing) and the heads. plotly.js is written once into <head>; every figure is a div.

`summary.json` (next to the HTML: `summary.json` beside the default `report.html`, else `<name>.summary.json`) is
for scripts: per run the config summary, final metrics, deposit statistics, the tables present/missing with their
parquet paths, and for every figure in the report the builder name, its keyword arguments, its runs and the tables
it was drawn from. A figure whose `derived` is null is drawn from the one stored table it names, of its one run:
`FIGURES[f["figure"]](stores.get(f["runs"][0]).load_table(f["tables"][0]), **f["kwargs"])` draws it again; the
others name the function that derives their table from the runs' stored tables (`derived`, e.g.
`experiments.convergence`, `ablation.aggregate_seeds`). `disclaimers`: {preset: its box as markdown} for the
presets of the selection, the base preset first.
"""
from __future__ import annotations

import functools
import html
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.report.heads import heads_section
from workbench.store import FILTERS

QUERY_KEYS = tuple(FILTERS) + ("id",)

# (table == ANALYSES name, section title, [(FIGURES name, kwargs)])
ANALYSIS_SECTIONS: list[tuple[str, str, list[tuple[str, dict]]]] = [
    ("qk_means", "q/k dimension means", [("qk_means", {})]),
    ("angles", "Initial angles (share of anomalous pairs against uniform random angles)",
     [("angles", {"value": "share_anomalous"}), ("angles_profile", {"value": "share_anomalous"})]),
    ("spectral", "Spectral / Toeplitz", [("spectral", {}), ("spectral_eigen", {})]),
    ("distance_bias", "Distance bias", [("distance_bias", {}), ("distance_bias_share", {})]),
    ("extrapolation", "Length extrapolation", [("extrapolation", {})]),
]
ABLATION_FIGURES = [("ablation", {"metric": "accuracy"}), ("ablation_layers", {"metric": "accuracy"}),
                    ("ablation_violins", {"metric": "accuracy"})]
# cross-run experiment tables (workbench.analysis.EXPERIMENTS), each shown when the selection holds both sides of
# what it compares: (name, title, column, values: every one of them, or an int: at least that many distinct)
EXPERIMENT_SECTIONS = [("partial_rope", "Partial RoPE", "variant", {"full", "partial"}),
                       ("mla_rope_nope", "MLA vs RoPE vs NoPE", "base", 2),
                       ("rope_vs_rope_sinusoidal", "RoPE vs RoPE+sinusoidal", "scheme", {"rope", "rope+sinusoidal"})]
CONFIG_KEYS = {"model": ["arch", "scheme", "scheme_kwargs", "d_model", "n_heads", "n_layers", "d_ff", "dropout",
                         "max_len", "vocab_size", "n_classes"],
               "task": ["task", "preset", "seed", "overrides"],
               "train": ["epochs", "batch_size", "lr", "seed", "schedule"]}


# ---- query -------------------------------------------------------------------------------------------
def parse_query(query: str | None) -> dict[str, list[str]]:
    """'all' / '' -> {}; 'scheme=rope|nope,task=trigger-distance' -> {'scheme': ['rope', 'nope'], ...}."""
    q = (query or "").strip()
    if q.lower() in ("", "all", "*"):
        return {}
    out: dict[str, list[str]] = {}
    for part in q.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ValueError(f"--runs {query!r}: {part!r} is not key=value (e.g. scheme=rope,task=trigger-distance, "
                             "or all)")
        if key not in QUERY_KEYS:
            raise ValueError(f"--runs {query!r}: unknown key {key!r}; use one of {list(QUERY_KEYS)}")
        values = [v.strip() for v in value.split("|") if v.strip()]
        if key == "seed" and not all(v.isdigit() for v in values):
            raise ValueError(f"--runs {query!r}: seed={value!r} must be whole numbers (e.g. seed=1|2)")
        out.setdefault(key, []).extend(values)
    return out


def select_runs(store, query: str | dict | None) -> pd.DataFrame:
    """The index rows (store.query) the query selects, oldest first."""
    filters = parse_query(query) if not isinstance(query, dict) else query
    ids = filters.get("id")
    rest = {k: v for k, v in filters.items() if k != "id"}
    if "seed" in rest:
        rest["seed"] = [int(s) for s in rest["seed"]]
    df = store.query(**rest)
    if ids:
        df = df[df["id"].isin(ids)]
    return df.iloc[::-1].reset_index(drop=True)


# ---- helpers -----------------------------------------------------------------------------------------
def inline_html(text: str) -> str:
    """Escaped text with the inline markdown the labels and `presets.Disclaimer` use: `code` and *emphasis*."""
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", out)


def _clean(v: Any) -> Any:
    """JSON-safe scalars: NaN/inf -> None, numpy -> python."""
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        try:
            v = v.item()
        except Exception:
            pass
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def records(df: pd.DataFrame) -> list[dict]:
    return [_clean(r) for r in df.to_dict("records")]


def _figures() -> dict:
    try:
        from workbench.figures import FIGURES
    except Exception:
        return {}
    return FIGURES


def deposit_stats(ablation: pd.DataFrame, metric: str = "accuracy") -> tuple[pd.DataFrame, str]:
    """(per-layer deposit statistics, one-sentence summary) from the shared analysis functions."""
    from workbench.analysis import deposit

    stats = deposit.compute(ablation, metric=metric)
    return stats, deposit.deposit_sentence(stats)


def convergence(runs: list) -> pd.DataFrame:
    from workbench.analysis import EXPERIMENTS

    return EXPERIMENTS["convergence"](runs=runs)


# ---- the document ------------------------------------------------------------------------------------
@dataclass
class Doc:
    """Accumulates HTML sections and the figure list of summary.json."""

    parts: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    keep: bool = False                                        # keep the figure objects (static export)
    objects: list = field(default_factory=list)

    def h(self, level: int, text: str, id: str | None = None) -> None:
        anchor = f' id="{html.escape(id)}"' if id else ""
        self.parts.append(f"<h{level}{anchor}>{inline_html(text)}</h{level}>")

    def p(self, text: str, cls: str = "") -> None:
        self.parts.append(f'<p class="{cls}">{html.escape(text)}</p>')

    def missing(self, text: str) -> None:
        self.parts.append(f'<p class="missing">○ {html.escape(text)}</p>')

    def reading(self, summary: dict) -> None:
        """What a run's status by the registered run rules means for its heads (`claims.reading_note`), under its
        heading; nothing for a run the claims count. `summary`: the run's summary (`reading_in`)."""
        from workbench.analysis.claims import reading_note

        note = reading_note(reading_in(summary))
        if note is not None:
            mark = "!" if note[0] == "warn" else "i"
            self.parts.append(f'<p class="reading-{note[0]}">{mark} {html.escape(summary["id"] + " " + note[1])}</p>')

    def error(self, text: str) -> None:
        self.problems.append(text)
        self.parts.append(f'<p class="error">✕ {html.escape(text)}</p>')

    def table(self, df: pd.DataFrame, max_rows: int = 60, rest: str = "not shown") -> None:
        """`df` as an HTML table of at most `max_rows` rows; `rest`: where the others are."""
        from workbench.figures.style import round_table

        shown = round_table(df.head(max_rows))
        body = shown.to_html(index=False, classes="tbl", border=0, na_rep="", float_format=lambda x: f"{x:.10g}",
                             escape=True)
        self.parts.append(f'<div class="tblwrap">{body}</div>')  # scrolls sideways; the key column stays
        if len(df) > max_rows:
            self.p(f"({len(df) - max_rows} more rows {rest})", "note")

    def figure(self, name: str, df: pd.DataFrame, section: str, run_ids: list[str], tables: list[str],
               kwargs: dict | None = None, height: int | None = None, derived: str | None = None) -> bool:
        """Draw FIGURES[name](df, **kwargs) as a div; summary.json records it. `derived`: the function that made
        `df` from the runs' stored tables (None: `df` is the stored table `tables[0]` of the one run `run_ids[0]`)."""
        import plotly.io as pio

        fn = _figures().get(name)
        if fn is None:
            self.error(f"no figure builder {name!r} in workbench.figures.FIGURES")
            return False
        from workbench.figures.kept import key_of

        key = None if self.keep else key_of(fn, df, kwargs=kwargs or {}, height=height)  # an export needs objects
        kept = _figure_html().get(key)
        if kept is not None:
            div, n_traces = kept
        else:
            try:
                fig = fn(df, **(kwargs or {}))
            except Exception as e:
                self.error(f"figure {name} for {', '.join(run_ids)} failed: {type(e).__name__}: {e}")
                return False
            if height:
                fig.update_layout(height=height)
            div, n_traces = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=_FIGURE_SLOT,
                                        config={"displaylogo": False, "responsive": True}), len(fig.data)
            _figure_html().put(key, (div, n_traces))
            if self.keep:
                self.objects.append(fig)
        fid = f"fig-{len(self.figures) + 1}"
        self.parts.append('<div class="fig">' + div.replace(_FIGURE_SLOT, fid) + "</div>")
        self.figures.append({"id": fid, "section": section, "figure": name, "kwargs": _clean(kwargs or {}),
                             "runs": run_ids, "tables": tables, "derived": derived, "n_traces": n_traces})
        return True


# Each figure's HTML (`figures.kept`), its div's id left as _FIGURE_SLOT: a report built again in the same process
# (the demo's full report after its first) draws only the figures whose tables changed.
_FIGURE_SLOT = "pelab-figure-slot-5b1f"


@functools.lru_cache(maxsize=1)
def _figure_html():
    from workbench.figures.kept import Kept

    return Kept(512)


CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d2330;background:#f7f8fa}
header{background:#1f2a44;color:#fff;padding:14px 24px} header h1{margin:0 0 4px;font-size:22px}
header .meta{color:#c5d0ea;font-size:13px} main{padding:8px 24px 40px;max-width:1400px}
nav.toc{font-size:13px;margin:10px 0} nav.toc a{margin-right:12px;color:#2d5be3}
section{background:#fff;border:1px solid #e1e5ec;border-radius:6px;padding:8px 16px;margin:14px 0}
h2{font-size:18px;margin:8px 0} h3{font-size:15px;margin:14px 0 6px;color:#2c3a55}
table.tbl{border-collapse:collapse;font-size:12.5px;margin:6px 0}
table.tbl th,table.tbl td{border-bottom:1px solid #e6e9ef;padding:3px 8px;text-align:left}
table.tbl th{background:#f1f3f6} .missing{color:#6b7488} .error{color:#b03a2e}
.tblwrap{overflow-x:auto;max-width:100%} .tblwrap table.tbl td:first-child{position:sticky;left:0;background:#fff}
.tblwrap table.tbl th:first-child{position:sticky;left:0;z-index:1}
.sentence{font-style:italic;color:#2c3a55} .note{color:#6b7488;font-size:12px}
.reading-warn{background:#fff8e1;border-left:3px solid #d69e2e;padding:4px 8px} .reading-info{color:#2c3a55}
.disclaimer{background:#fdf6e3;border:1px solid #e0a100;border-left:5px solid #e0a100;border-radius:6px}
.disclaimer{padding:4px 12px;margin:6px 0;font-size:13.5px;max-width:1200px}
.disclaimer ul{margin:4px 0;padding-left:20px} .disclaimer p{margin:4px 0} details.disclaimer summary{cursor:pointer}
"""


def _config_summary(cfg: dict) -> dict:
    out = {"preset": cfg.get("preset"), "tag": cfg.get("tag")}
    for section, keys in CONFIG_KEYS.items():
        sec = cfg.get(section) or {}
        out[section] = {k: sec.get(k) for k in keys if k in sec}
    return out


def not_applicable(model: dict) -> dict[str, str]:
    """Tables a run's model (its config's `model` section) cannot have, with the reason: initial angles need rotary
    planes; length extrapolation a scheme that runs past its training length as configured (`can_extrapolate`:
    not `learned`, nor MLA with a trained input position table)."""
    try:
        from workbench.model import ModelConfig, get_scheme

        scheme = model.get("scheme")
        cls = get_scheme(scheme)
        extrapolates = bool(getattr(cls(ModelConfig.from_dict(model)), "can_extrapolate", True))
    except Exception:  # an unreadable config: the pages' other hints say so
        return {}
    out = {} if getattr(cls, "rotary", False) else {
        "angles": f"{scheme} does not rotate q and k (initial angles need a rotary scheme)"}
    if not extrapolates:
        out["extrapolation"] = (f"{scheme}, as this run configures it, cannot run past its training length (a "
                                "trained position table ends there)")
    return out


def summarize_run(run, row: dict | None = None) -> dict:
    """Machine-readable summary of one run (what summary.json holds per run); `missing`: the tables the report's
    per-run sections show that the run lacks (ablation, the diagnostics, the heads' tables)."""
    from workbench.report.heads import FIGURES as HEADS_FIGURES

    row = row or {}
    try:
        cfg = run.config
    except Exception as e:
        return {"id": run.id, "status": "corrupt", "error": str(e)}
    present = run.tables()
    na = not_applicable(cfg["model"])
    wanted = [t for t in ["ablation"] + [name for name, _, _ in ANALYSIS_SECTIONS] + [t for t, _, _ in HEADS_FIGURES]
              if t not in na]
    info = run.info
    out = {"id": run.id, "scheme": cfg["model"].get("scheme"), "task": cfg["task"].get("task"),
           "arch": cfg["model"].get("arch"), "preset": cfg.get("preset"), "seed": cfg["train"].get("seed"),
           "status": run.status, "epochs_done": info.get("epoch", 0), "epochs": cfg["train"].get("epochs"),
           "error": info.get("error"), "wall_time_s": info.get("wall_time_s"), "path": str(run.path.resolve()),
           "source": "shipped" if getattr(run.store, "readonly", False) else "own",
           "config": _config_summary(cfg), "final": run.final,
           "tables": {"present": present, "missing": [t for t in wanted if t not in present],
                      "not_applicable": {t: na[t] for t in na if t not in present},
                      "files": {t: str(run.table_file(t).resolve()) for t in present},
                      "provenance": {t: made for t in present if (made := run.provenance_of(t))}},
           "deposits": None, "deposit_sentence": None}
    return _clean(out)


def reading_in(summary: dict) -> dict:
    """A run summary's reading by the registered run rules (its `run_status` and `run_why`), as `claims.as_read` and
    `claims.reading_note` take it."""
    return {"status": summary.get("run_status"), "why": summary.get("run_why")}


# ---- sections ----------------------------------------------------------------------------------------
def _runs_section(doc: Doc, runs: pd.DataFrame, summaries: list[dict], damaged: dict | None = None) -> None:
    doc.parts.append('<section id="runs">')
    doc.h(2, f"Runs ({len(runs)})")
    rows = []
    for s in summaries:
        fin = s.get("final") or {}
        rows.append({"id": s["id"], "scheme": s.get("scheme"), "task": s.get("task"), "arch": s.get("arch"),
                     "preset": s.get("preset"), "seed": s.get("seed"), "status": s.get("status"),
                     "epochs": f"{s.get('epochs_done', 0)}/{s.get('epochs')}", "test_acc": fin.get("test_acc"),
                     "shows": s.get("run_status") or "", "train_acc": fin.get("train_acc"),
                     "tables": ", ".join(s["tables"]["present"]) if "tables" in s else ""})
    if rows:  # accuracies in %, as on every page and in every figure
        from workbench.figures.style import percent_table

        doc.table(percent_table(pd.DataFrame(rows), headers=True), max_rows=500)
    for s in summaries:
        if s["id"] in (damaged or {}):
            continue  # named at the top with why
        if s.get("status") in ("failed", "corrupt"):
            doc.error(f"{s['id']} {s['status']}: {s.get('error') or 'no error recorded'} "
                      f"(resume with `workbench train --resume {s['id']}`)")
        elif s.get("status") in ("created", "interrupted", "running"):
            doc.missing(f"{s['id']} is {s['status']} after {s.get('epochs_done', 0)} of {s.get('epochs')} epochs: "
                        "partial results")
    doc.parts.append("</section>")


def _convergence_section(doc: Doc, store, runs: pd.DataFrame) -> None:
    doc.parts.append('<section id="convergence">')
    doc.h(2, "Convergence")
    trained = [r for r, e in zip(runs["id"], runs["epoch"].fillna(0)) if e and e > 0]
    if not trained:
        doc.missing("no run has finished an epoch: train with `workbench train --scheme rope --task "
                    "trigger-distance --preset cpu`")
    else:
        try:
            df = convergence([store.get(r) for r in trained])
        except Exception as e:
            doc.error(f"convergence table failed: {type(e).__name__}: {e}")
            df = None
        if df is not None and not df.empty:
            for metric in ("accuracy", "loss"):
                doc.figure("convergence", df, "convergence", trained, ["metrics"], {"metric": metric},
                           derived="experiments.convergence")
    doc.parts.append("</section>")


def _ablation_section(doc: Doc, store, summaries: list[dict]) -> pd.DataFrame:
    from workbench.analysis import deposit
    from workbench.analysis.claims import as_read
    from workbench.train.recreate import analyze_hint

    doc.parts.append('<section id="ablation">')
    doc.h(2, "Ablation atlas")
    doc.p("delta(l, h) = metric(clean) - metric(head h of layer l zeroed before W_O); 95 % bootstrap intervals over "
          "test examples; deposit statistics per layer (docs/paper.md §5).", "note")
    all_stats = []
    for s in summaries:
        run = store.get(s["id"])
        doc.h(3, s["id"], id=f"abl-{s['id']}")
        if "ablation" not in s.get("tables", {}).get("present", []):
            doc.missing(f"no ablation table yet: {analyze_hint(run, 'ablation')}")
            continue
        doc.reading(s)  # a run that did not learn: its heads hold no learned mechanism
        try:
            df = run.load_table("ablation")
        except Exception as e:
            doc.error(f"ablation table of {s['id']} unreadable: {e}")
            continue
        acc = df[df["metric"] == "accuracy"] if "metric" in df.columns else df
        for name, kw in ABLATION_FIGURES:
            doc.figure(name, acc, "ablation", [s["id"]], ["ablation"], kw)
        try:
            stats, sentence = deposit_stats(df, "accuracy")
        except Exception as e:
            doc.error(f"deposit statistics of {s['id']} failed: {type(e).__name__}: {e}")
            continue
        doc.p(as_read(sentence, reading_in(s)), "sentence")
        doc.figure("deposit", stats, "ablation", [s["id"]], ["ablation"], derived="deposit.compute")
        doc.table(deposit.shown_table(stats))
        s["deposits"], s["deposit_sentence"] = records(stats), sentence
        st = stats.copy()
        if "run_id" not in st.columns:
            st.insert(0, "run_id", s["id"])
        all_stats.append(st)
    doc.parts.append("</section>")
    return pd.concat(all_stats, ignore_index=True) if all_stats else pd.DataFrame()


def _deposits_section(doc: Doc, stats: pd.DataFrame) -> None:
    doc.parts.append('<section id="deposits">')
    doc.h(2, "Deposit statistics (all runs)")
    if stats.empty:
        doc.missing("no ablation tables in the selection")
    else:
        doc.table(stats, max_rows=400, rest="in summary.json (each run's `deposits`)")
    doc.parts.append("</section>")


def _experiments_section(doc: Doc, store, summaries: list[dict], summary: dict) -> None:
    """Cross-run experiment tables (partial RoPE, MLA vs RoPE vs NoPE, RoPE vs RoPE+sinusoidal) over the
    selected runs that have an ablation table, when there is something to compare."""
    from workbench.analysis.claims import read_runs
    from workbench.figures.style import percent_table

    doc.parts.append('<section id="experiments">')
    doc.h(2, "Experiments (core paper, section 5)")
    try:
        from workbench.analysis import EXPERIMENTS
    except Exception as e:
        doc.error(f"workbench.analysis.EXPERIMENTS unavailable: {e}")
        EXPERIMENTS = {}
    ablated = [store.get(s["id"]) for s in summaries
               if {"ablation", "deposit"} & set(s.get("tables", {}).get("present", []))]
    shown = False
    for name, title, column, sides in EXPERIMENT_SECTIONS:
        fn = EXPERIMENTS.get(name)
        if fn is None:
            continue
        try:
            table = fn(runs=ablated, compute_missing=False)
        except Exception as e:
            doc.missing(f"{title}: {type(e).__name__}: {e}")
            continue
        held = set(table[column]) if column in table else set()
        if not (len(held) >= sides if isinstance(sides, int) else sides <= held):
            continue  # one side of the comparison is not in this selection
        doc.h(3, title)
        doc.figure(name, table, f"experiments/{name}", list(dict.fromkeys(table["run_id"])), ["ablation"],
                   derived=f"experiments.{name}")
        shows = {s["id"]: s.get("run_status") for s in summaries}  # each run's status, its deposit read by it
        doc.table(percent_table(read_runs(table, shows), headers=True),  # accuracies in %; deltas stay fractions
                  rest="in summary.json (`experiments`)")
        summary["experiments"][name] = records(table)
        shown = True
    if not shown:
        doc.missing("no experiment applies to this selection: partial RoPE needs a full and a partial RoPE run, "
                    "MLA vs RoPE vs NoPE two of those schemes, RoPE vs RoPE+sinusoidal one run of each, each run "
                    "with an ablation table")
    doc.parts.append("</section>")


def _diagnostics_section(doc: Doc, store, summaries: list[dict]) -> None:
    doc.parts.append('<section id="diagnostics">')
    doc.h(2, "Diagnostics")
    for table, title, figs in ANALYSIS_SECTIONS:
        doc.h(3, title, id=f"diag-{table}")
        have = [s for s in summaries if table in s.get("tables", {}).get("present", [])]
        na = [s["id"] for s in summaries if table in s.get("tables", {}).get("not_applicable", {})]
        missing = [s["id"] for s in summaries if s not in have and s["id"] not in na]
        for s in have:
            try:
                df = store.get(s["id"]).load_table(table)
            except Exception as e:
                doc.error(f"{table} table of {s['id']} unreadable: {e}")
                continue
            doc.p(s["id"], "note")
            for name, kw in figs:
                doc.figure(name, df, f"diagnostics/{table}", [s["id"]], [table], kw)
        if table == "extrapolation" and len(have) > 1:
            frames = []
            for s in have:
                try:
                    frames.append(store.get(s["id"]).load_table(table))
                except Exception:
                    pass
            if len(frames) > 1:
                doc.p("all runs together", "note")
                doc.figure("extrapolation", pd.concat(frames, ignore_index=True), f"diagnostics/{table}",
                           [s["id"] for s in have], [table], derived="the runs' tables, concatenated")
        if na:
            doc.p(f"not applicable to {', '.join(na)}", "note")
        if missing:
            first = ("; a shipped run first `workbench recreate RUN` (no weights are shipped)"
                     if any(s.get("source") == "shipped" for s in summaries if s["id"] in missing) else "")
            doc.missing(f"missing for {', '.join(missing)}: `workbench analyze RUN --what {table.replace('_', '-')}`"
                        f"{first}")
    doc.parts.append("</section>")


# ---- entry point -------------------------------------------------------------------------------------
def build_report(store, query: str | None, out: str | Path, title: str | None = None,
                 summary_path: str | Path | None = None, figures_dir: str | Path | None = None,
                 figure_format: str = "svg", log=None) -> dict:
    """Write the HTML report to `out` and summary.json next to it (or to `summary_path`); return the summary.
    The report opens on the findings and a view per setting (`report.overview`); per-run diagnostics follow when
    the selection has at most `overview.MAX_DETAIL_RUNS` runs (a larger one says so, and how to narrow it). `log`
    gets a line per step of long work. With `figures_dir`, every figure is also written there as
    `<fig-id>-<builder>.<figure_format>` (svg, pdf, png; static export, `workbench.figures.export`) and its path
    recorded as `file` in summary.json."""
    if figures_dir is not None:
        from workbench.figures.export import check_export, export_format

        export_format(f"x.{figure_format}")
        check_export()  # fail before the work, with a clear message, when no browser is available
    import plotly

    from workbench.analysis.claims import reading_of
    from workbench.analysis.findings import MemoStore
    from workbench.report.overview import (MAX_DETAIL_RUNS, disclaimer_section, findings_section, finished_table,
                                           settings_section)
    from workbench.store import StoreSet, code_version

    log = log or (lambda msg: None)
    store = store if hasattr(store, "query") else StoreSet.open(store)
    memo = MemoStore(store)  # the findings and the view per setting read each run's tables once
    out = Path(out)
    summary_path = Path(summary_path) if summary_path else default_summary_path(out)
    filters = parse_query(query) if not isinstance(query, dict) else query
    runs = select_runs(store, filters)
    t0 = time.time()
    doc = Doc(keep=figures_dir is not None)
    summaries = []
    for row in runs.to_dict("records"):
        try:
            summaries.append(summarize_run(store.get(row["id"]), row))
        except Exception as e:
            summaries.append({"id": row["id"], "status": "corrupt", "error": str(e)})
    for s in summaries:  # what each run can show by the registered run rules, as the pickers and `runs --rules` say
        reading = reading_of(store.get(s["id"])) if s.get("status") != "corrupt" else None
        s["run_status"], s["run_why"] = (reading["status"], reading["why"]) if reading else (None, None)
    summary: dict[str, Any] = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "query": query or "all",
        "filters": filters,
        "store": str(Path(store.root).resolve()), "code_version": code_version(),
        "shipped": str(Path(store.shipped.root).resolve()) if getattr(store, "shipped", None) else None,
        "plotly_version": plotly.__version__, "report": str(out.resolve()), "runs": summaries,
        "experiments": {}, "figures": doc.figures, "problems": doc.problems,
    }
    damaged = _damaged(store, filters)
    summary["damaged"] = damaged
    for rid, why in damaged.items():  # named first, never silently left out (`workbench check` says the same)
        doc.error(f"{rid} is damaged: {' '.join(str(why).split())}; left out of what this report computes")
    if runs.empty:
        doc.parts.append('<section id="runs">')
        doc.missing(f"no runs match {query or 'all'!r} in {_stores_named(store)}: train some with `workbench train "
                    "--scheme rope --task trigger-distance --preset cpu`")
        doc.parts.append("</section>")
    else:
        ok = [s for s in summaries if s.get("status") != "corrupt"]
        detail = len(runs) <= MAX_DETAIL_RUNS
        summary["per_run_diagnostics"] = detail
        try:
            rt = finished_table(memo, runs)
        except Exception as e:
            doc.error(f"the run table could not be read: {type(e).__name__}: {e}")
            rt = pd.DataFrame()
        disclaimer_section(doc, runs, rt, summary)  # what differs from the paper's setup, before any result
        findings_section(doc, memo, rt, summary, log)
        settings_section(doc, memo, rt, log)
        _runs_section(doc, runs, summaries, damaged)
        if detail:
            log(f"per-run diagnostics of {len(ok)} runs")
            _convergence_section(doc, store, runs)
            stats = _ablation_section(doc, store, ok)
            _deposits_section(doc, stats)
            _experiments_section(doc, store, ok, summary)
            _diagnostics_section(doc, store, ok)
            heads_section(doc, store, ok, summary)
        else:
            doc.p(f"{len(runs)} runs selected: the per-run diagnostics (atlases, diagnostics and heads of each run) "
                  f"are written for at most {MAX_DETAIL_RUNS} runs. Narrow the selection for them, e.g. "
                  "`--runs preset=repro,scheme=rope,seed=42` or `--runs id=RUN_A|RUN_B`.", "note")
    title = title or f"PE-Lab report: {query or 'all'}"
    body = "\n".join(doc.parts)
    toc = " ".join(f'<a href="#{a}">{t}</a>' for a, t in TOC if f'<section id="{a}">' in body)  # the sections written
    # the stores by their folders' names: a report is a file to share, and its machine's paths are nobody else's
    # (summary.json, for scripts on this machine, keeps the full paths)
    meta = (f"{len(runs)} run(s) · {html.escape(_stores_named(store))} · code {html.escape(summary['code_version'])}"
            f" · generated {html.escape(summary['generated'])}")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style>{plotly_loader()}</head><body>"
            f"<header><h1>{html.escape(title)}</h1><div class=\"meta\">{meta}</div></header><main>"
            f"<nav class=\"toc\">{toc}</nav>" + body + "</main></body></html>\n")
    if figures_dir is not None and doc.objects:
        from workbench.figures.export import write_figures

        paths = [Path(figures_dir) / f"{f['id']}-{f['figure']}.{figure_format}" for f in doc.figures]
        for f, p in zip(doc.figures, write_figures(doc.objects, paths)):
            f["file"] = str(p.resolve())
    summary["build_s"] = round(time.time() - t0, 2)
    log(f"writing {out} ({len(doc.figures)} figures)")
    from workbench.store import atomic_write_text

    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, page)
    atomic_write_text(summary_path, json.dumps(_clean(summary), indent=2, sort_keys=False, default=str) + "\n")
    return summary


TOC = (("findings", "Findings"), ("settings", "Per setting"), ("runs", "Runs"), ("convergence", "Convergence"),
       ("ablation", "Ablation atlas"), ("deposits", "Deposits"), ("experiments", "Experiments"),
       ("diagnostics", "Diagnostics"), ("heads", "Heads"))  # the report's sections, in order (anchor, link text)


def default_summary_path(out: Path) -> Path:
    """Where summary.json goes beside the report `out`: `summary.json` beside a `report.html` (the default name),
    else `<name>.summary.json`, so two reports in one folder keep their own."""
    return out.with_name("summary.json" if out.name == "report.html" else f"{out.stem}.summary.json")


def _damaged(store, filters: dict) -> dict[str, str]:
    """The damaged runs the selection's filters would select (`damaged` of the store: an unreadable run has no
    config, so only its id can be matched)."""
    damaged = store.damaged()
    ids = filters.get("id")
    return {rid: why for rid, why in damaged.items() if not ids or rid in ids}


def _stores_named(store) -> str:
    """'store runs + shipped repro': the stores a report reads, by their folders' names."""
    shipped = getattr(store, "shipped", None)
    return f"store {Path(store.root).name}" + (f" + shipped {Path(shipped.root).name}" if shipped else "")


PLOTLY_PAYLOAD_ID = "pelab-plotly-gz"


@functools.lru_cache(maxsize=1)
def plotly_payload() -> str:
    """plotly.js, gzipped and base64-encoded: 2 MB in the report instead of 4.8 MB."""
    import base64
    import gzip

    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()


def plotly_loader() -> str:
    """The report's one copy of plotly.js (`plotly_payload`) and the script that unpacks it in the browser
    (DecompressionStream: Chrome 80, Firefox 113, Safari 16.4) and then draws the figures, which queue their
    `Plotly.newPlot` calls until it is loaded. No network: the file opens offline."""
    return (f'<script type="application/octet-stream" id="{PLOTLY_PAYLOAD_ID}">{plotly_payload()}</script>'
            "<script>(function(){var q=[];window.PLOTLYENV=window.PLOTLYENV||{};"
            "window.Plotly={newPlot:function(){q.push(arguments);return Promise.resolve();}};"
            "function fail(e){document.body.insertAdjacentHTML('afterbegin','<p class=\"error\">This browser '"
            "+'cannot unpack the embedded plotly.js (it needs DecompressionStream): '+e+'</p>');}"
            "async function load(){var b=atob(document.getElementById('" + PLOTLY_PAYLOAD_ID + "').textContent);"
            "var u=new Uint8Array(b.length);for(var i=0;i<b.length;i++)u[i]=b.charCodeAt(i);"
            "var js=await new Response(new Blob([u]).stream().pipeThrough(new DecompressionStream('gzip'))).text();"
            "var s=document.createElement('script');s.text=js;document.head.appendChild(s);"
            "q.forEach(function(a){window.Plotly.newPlot.apply(null,a);});}"
            "var go=function(){load().catch(fail);};"
            "if(document.readyState==='loading')document.addEventListener('DOMContentLoaded',go);else go();"
            "})();</script>")

