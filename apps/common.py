"""What every page shares: the store of the current app, run pickers, hints, graphs, the job panel.

Pages never compute an analysis or draw a figure themselves: tables come from the run store
(`Run.load_table`), figures from `workbench.figures.FIGURES`, analyses from `workbench.analysis.ANALYSES`.
This module only adapts them to Dash components and turns every failure into a readable hint.

The stores are fixed when the server starts (`AppContext`: the user's store and an optional read-only store
of shipped results) and held server-side; callbacks get them from `stores()`, never from a request value. A run
id from the browser reaches the store only through `get_run`, which checks the id pattern and the stores'
run folders and otherwise answers "unknown run". Hints never show a traceback or a server path.
"""
from __future__ import annotations

import functools
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from dash import dcc, html

GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


# ---- the app's context ---------------------------------------------------------------------------
@dataclass
class AppContext:
    """Per-app settings fixed at start, kept in `app.server.config["PELAB"]` (layouts run inside a request;
    background jobs receive the context itself)."""

    store_root: Path
    cache_dir: Path
    shipped_root: Path | None = None

    def stores(self):
        """The user's store (writable) and the shipped results (read-only) as one `StoreSet`."""
        from workbench.store import RunStore, StoreSet

        shipped = RunStore(self.shipped_root, readonly=True) if self.shipped_root else None
        return StoreSet(RunStore(self.store_root, create=False), shipped)  # made by the first run trained


def url_int(value, default: int = 0) -> int:
    """A whole number from a page URL's query value (`?example=12`), else `default`: a layout never fails on the
    text a browser sends."""
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else default


def current() -> AppContext:
    from flask import current_app

    return current_app.config["PELAB"]


def stores():
    """The stores of the current app (inside a request)."""
    return current().stores()


# ---- registries (imported lazily: the app starts even when a package is broken) -------------------
def analyses() -> dict[str, Callable]:
    try:
        from workbench.analysis import ANALYSES
    except Exception:  # pragma: no cover - shown as a hint on the pages
        return {}
    return ANALYSES


def figures() -> dict[str, Callable]:
    try:
        from workbench.figures import FIGURES
    except Exception:  # pragma: no cover
        return {}
    return FIGURES


def not_applicable_type() -> type:
    try:
        from workbench.analysis import NotApplicable
    except Exception:  # pragma: no cover
        return type("NotApplicable", (Exception,), {})
    return NotApplicable


# ---- runs ------------------------------------------------------------------------------------------
FILTER_KEYS = ("scheme", "task", "arch", "preset", "status")


def query_runs(store, **filters) -> pd.DataFrame:
    """store.query with empty filters dropped, and values a browser may send that are not text or numbers
    ignored; an empty frame (with the store's columns) on no runs."""
    def scalars(v):
        vs = [x for x in (v if isinstance(v, list) else [v]) if isinstance(x, (str, int, float)) and not
              isinstance(x, bool) and x != ""]
        return vs or None

    clean = {k: vs for k, v in filters.items() if (vs := scalars(v))}
    return store.query(**clean)


STATUS_PHRASE = {"ceiling": "at the ceiling", "ceiling, not settled": "at the ceiling, not settled"}
_STATUS: dict[str, tuple[tuple, str | None]] = {}  # run folder -> (its index state, its run status)


def run_statuses(store, df: pd.DataFrame) -> list[str | None]:
    """Each indexed run's status by the registered run rules (`claims.index_statuses`: the run table's and the
    verdicts' one reading, learned, still learning, ceiling, did not learn, diverged ...), None for a run without an
    epoch or that cannot be read; memoised across page loads in `_STATUS`, so a refresh reads only the runs that
    changed."""
    from workbench.analysis.claims import index_statuses

    return index_statuses(store, df, _STATUS)


def warm_index(ctx: AppContext) -> None:
    """Read every run's status once (`index` of the app's stores), so the first page's run pickers do not wait for
    it (the server calls it in a thread at start, before the Findings page's tables); a failure is left for the
    pages to show."""
    try:
        index(ctx.stores())
    except Exception:
        pass


def learned(row: dict | pd.Series) -> bool | None:
    """Whether an indexed run learned the task by the registered rule (its `run_status`; None when unknown)."""
    from workbench.analysis.claims import NOT_LEARNED

    st = row.get("run_status")
    return None if not isinstance(st, str) else st not in NOT_LEARNED


def index(store, **filters) -> pd.DataFrame:
    """`query_runs` plus each run's setting (`workbench.analysis.settings.annotate`) and `run_status`
    (`run_statuses`)."""
    from workbench.analysis.settings import annotate

    df = annotate(query_runs(store, **filters))
    df["run_status"] = run_statuses(store, df) if len(df) else pd.Series(dtype=object)
    return df


def run_label(row: dict | pd.Series) -> str:
    """`variant · Task n · seed s · setting · acc 98.3 % still learning · status — run id`: which run it is at a
    glance (what it can show by the registered run rules, `run_status`, when the index has it), the full id last."""
    from workbench.analysis.common import task_label
    from workbench.analysis.settings import setting_label
    from workbench.figures.style import pct

    acc = row.get("test_acc")
    bits = [str(row.get("variant") or row.get("scheme") or "?"), task_label(row.get("task")) or str(row.get("task"))]
    seed = row.get("seed")
    if isinstance(seed, (int, float)) and seed == seed:
        bits.append(f"seed {int(seed)}")
    if row.get("setting"):
        bits.append(setting_label(row["setting"], row.get("preset"), short=True))
    if isinstance(acc, (int, float)) and acc == acc:
        st = row.get("run_status")
        bits.append(f"acc {pct(acc)}" + (f" {STATUS_PHRASE.get(st, st)}" if isinstance(st, str) else ""))
    status = row.get("status")
    if status and status != "finished":
        bits.append(str(status))
    return " · ".join(bits) + f" — {row.get('id')}"


def sort_index(df: pd.DataFrame) -> pd.DataFrame:
    """An annotated index in reading order: setting (`SETTINGS` order), preset, Task 1 before Task 2, variant, seed."""
    from workbench.analysis.settings import SETTINGS
    from workbench.figures.style import TASK_ORDER

    order = {k: i for i, k in enumerate(SETTINGS)}
    tasks = {t: i for i, t in enumerate(TASK_ORDER)}
    keyed = df.assign(_o=df["setting"].map(order).fillna(len(order)), _t=df["task"].map(tasks).fillna(len(tasks)))
    keyed = keyed.sort_values(["_o", "preset", "_t", "task", "variant", "seed"], kind="stable")
    return keyed.drop(columns=["_o", "_t"])


def run_options(df: pd.DataFrame) -> list[dict]:
    """Dropdown options of an index in reading order (annotated with settings here when it is not yet); a damaged
    run (index status `corrupt`) is listed last, disabled, with why (`damaged_label`)."""
    if df.empty:
        return []
    if "setting" not in df.columns:
        from workbench.analysis.settings import annotate

        df = annotate(df)
    df = sort_index(df)
    ok = df["status"] != "corrupt" if "status" in df.columns else pd.Series(True, index=df.index)
    return ([{"label": run_label(r), "value": r["id"]} for r in df[ok].to_dict("records")]
            + [{"label": damaged_label(r["id"], r.get("error")), "value": r["id"], "disabled": True}
               for r in df[~ok].to_dict("records")])


def damaged_label(run_id: str, why: str | None) -> str:
    """`damaged — run id: why` (no server paths): how a picker and the pages name a run that cannot be read."""
    why = re.sub(r"^run '[^']*'(, file [^:]+)?: (damaged: )?", "", redact_paths(str(why or "unreadable")))
    return f"damaged — {run_id}: {why}"


def damaged_hints(stores) -> list:
    """One hint per run of `stores` that cannot be read or changed since it was shipped (`StoreSet.damaged`),
    saying it is left out of what the page shows; [] when there is none."""
    return [hint(f"{damaged_label(rid, why)}. Left out of what this page computes.", kind="error")
            for rid, why in stores.damaged().items()]


HEADLINE_PRESET = "repro"  # the shipped reproduction's main preset (its scale-ladder rungs are other presets)


def partner_run(df: pd.DataFrame, a: str | None, **kw) -> str | None:
    """The run to set beside `a` by default (the Ablation page's run B, the Runs page's comparison): NoPE of its task,
    setting and preset, else another run of those, else any other run (`default_run` with `kw`)."""
    rest = df[df["id"] != a]
    if a is None or rest.empty:
        return None
    ra = df.set_index("id").loc[a]
    same = rest[(rest["task"] == ra["task"]) & (rest["setting"] == ra["setting"]) & (rest["preset"] == ra["preset"])]
    return default_run(same if not same.empty else rest, None, prefer=("nope",), learned_first=False, **kw)


def default_run(df: pd.DataFrame, want: str | None = None, need_table: str | None = None,
                store=None, prefer: tuple[str, ...] = ("rope",), learned_first: bool = True,
                need_weights: bool = False) -> str | None:
    """`want` if it is a run in df; else the run a page should open on: finished, learned the task, the user's own
    (the newest first) before the shipped ones, of a scheme in `prefer` (in that order), of the default setting
    (`paper` arch, untagged: tier 1), of the headline preset (HEADLINE_PRESET, not a scale-ladder rung), on Task 1,
    the lowest seed, with `need_table` when given -- each criterion dropped last-first when no run meets them all:
    on the shipped results alone, `paper` arch RoPE, Task 1, `repro`, seed 42. `learned_first=False` (a comparison
    run, e.g. NoPE beside RoPE) lets the scheme count before having learned; `need_weights` (a page that runs the
    model) puts runs with weights (own runs) before the shipped ones whatever the scheme."""
    if df.empty:
        return None
    ids = list(df["id"])
    if want in ids:
        return want
    from workbench.analysis.settings import DEFAULT_SETTING

    if "setting" not in df.columns:
        from workbench.analysis.settings import annotate

        df = annotate(df)

    def score(r) -> tuple:
        scheme_rank = prefer.index(r["scheme"]) if r.get("scheme") in prefer else len(prefer)
        own = r.get("source", "own") == "own"
        newest = -pd.Timestamp(r["created"]).value if own and isinstance(r.get("created"), str) else 0
        return (r.get("status") != "finished", need_weights and not own,
                learned_first and learned(r) is not True, not own, scheme_rank, newest,
                r.get("setting") != DEFAULT_SETTING or r.get("variant") != r.get("scheme"),
                r.get("preset") != HEADLINE_PRESET, r.get("task") != "trigger-distance",
                r.get("seed") if isinstance(r.get("seed"), (int, float)) and r.get("seed") == r.get("seed")
                else float("inf"))

    ranked = [r["id"] for r in sorted(df.to_dict("records"), key=score)]
    if need_table and store is not None:
        for rid in ranked:
            try:
                if store.get(rid).has_table(need_table):
                    return rid
            except Exception:
                continue
    return ranked[0]


MAX_LINES = 10   # lines a figure draws by default (readable defaults: "all runs" is a choice)


def curve_runs(df: pd.DataFrame, show: str = "schemes", limit: int = MAX_LINES) -> list[str]:
    """The runs whose curves a figure draws by default: `schemes` -- per task the plain variants (one per
    scheme, `settings.plain_variant`: tier 1, the authors' `rope` of scheme rope+sinusoidal too), those with the
    most seeds first (only those with several seeds when there are 3 or more of them), at most `limit` of them (all
    variants when none is plain); `variants` and `runs` -- every run with an epoch done."""
    from workbench.analysis.settings import plain_variant

    df = df[df["epoch"].fillna(0) > 0] if "epoch" in df.columns else df
    if show != "schemes" or df.empty:
        return list(df["id"])
    plain = df[plain_variant(df)]
    pool = plain if not plain.empty else df
    keep = []
    for _, sub in pool.groupby("task"):
        counts = sub.groupby("variant")["id"].size().sort_values(ascending=False, kind="stable")
        if (counts > 1).sum() >= 3:  # enough variants with several seeds: single runs are a choice, not the default
            counts = counts[counts > 1]
        variants = set(counts.index[:limit])
        keep += list(sub.loc[sub["variant"].isin(variants), "id"])
    return keep


def get_run(store, run_id: Any):
    """(run, None) or (None, hint component). `run_id` may come from the browser: anything that is not the id of
    a run folder in `store` (a StoreSet) -- a path, `..`, a list -- is an "unknown run" hint."""
    from workbench.store import StoreError

    if not run_id:
        return None, no_runs_hint(store)
    if not isinstance(run_id, str):
        return None, hint(f"Unknown run {str(run_id)[:60]!r}: pick a run from the list.", kind="error")
    try:
        return store.get(run_id), None
    except StoreError as e:  # unknown id, missing folder, corrupted config
        return None, hint(f"Run {run_id[:80]} cannot be used: {e}", kind="error")


def run_state_hint(run) -> html.Div | None:
    """A hint for runs that are not finished (created, running, interrupted, failed), else None."""
    try:
        status = run.status
        info = run.info
    except Exception as e:
        return hint(f"Run {run.id} cannot be read: {e}", kind="error")
    if status == "finished":
        return None
    cmd = f"workbench train --resume {run.id}"
    if status == "failed":
        err = (info.get("error") or "no error message recorded").strip().splitlines()
        return hint(f"Run {run.id} failed: {err[-1] if err else ''}", cmd=cmd, kind="error",
                    extra="Fix the cause, then resume or retrain it.")
    if status == "running":
        return hint(f"Run {run.id} is still training (epoch {info.get('epoch', 0)}); what is shown is its last "
                    "checkpoint.", kind="info")
    if status == "interrupted":
        return hint(f"Run {run.id} was interrupted at epoch {info.get('epoch', 0)}; it is partial.", cmd=cmd,
                    kind="warn")
    return hint(f"Run {run.id} has not been trained yet (status {status}).", cmd=cmd, kind="warn")


def run_reading(run) -> dict | None:
    """A finished run's reading by the registered run rules (`claims.reading_of`: status and why), None for a run
    not finished (`run_state_hint` speaks for it) or without a reading."""
    from workbench.analysis.claims import reading_of

    try:
        finished = run.status == "finished"
    except Exception:
        return None
    return reading_of(run) if finished else None


def reading_hint(run, reading: dict | None) -> html.Div | None:
    """What a run's reading means for its heads, above a page that reads them (ablation, heads;
    `claims.reading_note`): a warning for a run that did not learn or diverged, a note for one still learning, None
    for one the claims count."""
    from workbench.analysis.claims import reading_note

    note = reading_note(reading)
    return None if note is None else hint(f"{run.id} {note[1]}", kind=note[0])


def shown_path(path) -> str:
    """A store folder as a user named it: relative to the working folder when under it, else its name alone
    (no server path reaches the page)."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return p.name


def gpu_needed(run) -> str | None:
    """`recreate.gpu_needed` of a shipped run (trained on a GPU, none here: no Re-create button), else None."""
    from workbench.train.recreate import gpu_needed as needed

    try:
        return needed(run.info, run.id)
    except Exception:  # an unreadable run.json: the pages' other hints say so
        return None


def no_weights_hint(run) -> html.Div:
    """Why a live view of `run` is empty: a shipped run without weights (re-create it, where it can be), else its
    state."""
    if run.store.readonly:
        why = gpu_needed(run)
        if why:
            return hint(f"{run.id} is a shipped run without weights: nothing can run live here; {why}.",
                        kind="missing")
        return hint(f"{run.id} is a shipped run without weights: nothing can run live until it is re-created in "
                    f"your store (Re-create this run, or `workbench recreate {run.id}`).", kind="missing")
    return run_state_hint(run) or hint(f"{run.id} has no checkpoint yet.")


def has_checkpoint(run) -> bool:
    try:
        return run.has_checkpoint()
    except Exception:
        return False


def needs_recreate(stores, run_id: Any) -> bool:
    """Whether `run_id` names a run of the shipped store (a StoreSet's `shipped`) whose weights are not at hand:
    the shipped folder has none and the own store holds no finished copy with weights."""
    from workbench.store import StoreError, check_run_id

    if stores.shipped is None or not isinstance(run_id, str):
        return False
    try:
        check_run_id(run_id)
        if run_id not in stores.shipped.run_ids() or stores.shipped.get(run_id).has_weights:
            return False
        if run_id not in stores.own.run_ids():
            return True
        own = stores.own.get(run_id)
        return not (own.status == "finished" and own.has_weights)
    except StoreError:
        return False


def shipped_copy(stores, run_id: Any) -> bool:
    """Whether the own store's `run_id` is a finished re-created copy of a shipped run."""
    try:
        return (stores.shipped is not None and isinstance(run_id, str) and not needs_recreate(stores, run_id)
                and run_id in stores.shipped.run_ids() and stores.store_of(run_id)[0] == "own")
    except Exception:
        return False


# ---- tables ------------------------------------------------------------------------------------------
def load_table(run, name: str, button: str = "Run") -> tuple[pd.DataFrame | None, html.Div | None]:
    """(table, None) or (None, hint) for a missing / unreadable table; `button`: the page's button that computes it."""
    try:
        if not run.has_table(name):
            return None, missing_table_hint(run, name, button)
        return run.load_table(name), None
    except Exception as e:
        from workbench.train.recreate import analyze_command

        return None, hint(f"Table {name!r} of run {run.id} cannot be read: {e}", kind="error",
                          cmd=analyze_command(run.id, name))


def missing_table_hint(run, name: str, button: str | None = "Run") -> html.Div:
    """Why `run` has no table `name` and how to get it: the command, or `button` of the page (None: no button)."""
    from workbench.train.recreate import analyze_command as analyze_cmd

    tail = f" or press {button}" if button else ""
    if getattr(run.store, "readonly", False):  # computing it needs the weights, which are not shipped
        why = gpu_needed(run)
        if why:
            return hint(f"no {name} table for the shipped run {run.id}, and no weights to compute it: {why}, then "
                        f"`{analyze_cmd(run.id, name)}`.", kind="missing")
        return hint(f"no {name} table for the shipped run {run.id}: re-create it in your store first (Re-create "
                    f"this run, or `workbench recreate {run.id}`), then run `{analyze_cmd(run.id, name)}`{tail}.",
                    kind="missing")
    return hint(f"no {name} table yet for {run.id}: run `{analyze_cmd(run.id, name)}`{tail}.",
                kind="missing")


def no_runs_hint(store=None) -> html.Div:
    where = f" in the store {Path(store.root).name}" if store is not None else ""
    return hint(f"No runs{where} yet: train one with `workbench train --scheme rope --task trigger-distance "
                "--preset cpu` (or the Train panel on the Runs page).", kind="missing")


# ---- figures -------------------------------------------------------------------------------------------
def build_figure(name: str, df: pd.DataFrame, **kwargs):
    """(figure, None) or (None, hint) -- a figure builder that fails becomes a hint, not a trace."""
    fn = figures().get(name)
    if fn is None:
        return None, hint(f"No figure builder {name!r} in workbench.figures.FIGURES "
                          f"(have: {', '.join(sorted(figures())) or 'none'}).", kind="error")
    try:
        return fn(df, **kwargs), None
    except Exception as e:  # the message only: no stack frames or server paths reach the browser
        return None, hint(f"The {name} figure could not be drawn: {type(e).__name__}: {e}", kind="error")


def graph(fig, id: str | dict | None = None, height: int | None = None, **kwargs) -> dcc.Graph:
    if height is not None:
        fig.update_layout(height=height)
    props = {"figure": fig, "config": GRAPH_CONFIG, "className": "pelab-graph", **kwargs}
    if id is not None:
        props["id"] = id
    return dcc.Graph(**props)


def figure_or_hint(name: str, df: pd.DataFrame | None, missing: html.Div | None = None, height: int | None = None,
                   id: str | dict | None = None, **kwargs):
    """A graph (with `id`) of FIGURES[name](df, **kwargs) at `height`, or the hint of `build_figure` (`missing` for
    no table). The figure's JSON is kept (`figures.kept`): the same table shown again is not drawn again."""
    if df is None:
        return missing
    from workbench.figures.kept import key_of

    fn = figures().get(name)
    key = key_of(fn, df, kwargs=kwargs, height=height) if fn is not None else None
    drawn = _drawn().get(key)
    if drawn is None:
        fig, err = build_figure(name, df, **kwargs)
        if fig is None:
            return err
        if height is not None:
            fig.update_layout(height=height)
        drawn = fig.to_plotly_json()  # the figure object goes: nothing can change what is kept
        _drawn().put(key, drawn)
    return graph(drawn, id=id)


@functools.lru_cache(maxsize=1)
def _drawn():
    from workbench.figures.kept import Kept

    return Kept(128)


# ---- small components --------------------------------------------------------------------------------
ICONS = {"missing": "○", "error": "✕", "warn": "!", "info": "i", "ok": "✓"}


def _inline_code(text: str) -> list:
    """Render `backticks` as <code>."""
    parts = text.split("`")
    return [html.Code(p) if i % 2 else p for i, p in enumerate(parts)]


_ABS_PATH = re.compile(r"(?<![\w.:])(?:/[^\s/'\"():,;]+)+/?")


def redact_paths(text: str) -> str:
    """Replace absolute server paths by their last component (`/home/u/runs/x/run.json` -> `run.json`)."""
    return _ABS_PATH.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1] or "/", str(text))


def hint(text: str, cmd: str | None = None, kind: str = "missing", extra: str | None = None,
         details: str | None = None) -> html.Div:
    """A message box; server paths in `text`, `extra` and `details` are reduced to file names."""
    text, extra, details = (redact_paths(t) if t else t for t in (text, extra, details))
    children = [html.Span(ICONS.get(kind, "i"), className="hint-icon"), html.Span(_inline_code(text))]
    if cmd:
        children += [html.Span(" Run "), html.Code(cmd)]
    if extra:
        children.append(html.Div(extra, className="hint-extra"))
    if details:
        children.append(html.Details([html.Summary("details"), html.Pre(details)]))
    return html.Div(children, className=f"hint hint-{kind}")


def page_header(title: str, blurb: str) -> html.Div:
    return html.Div([html.H2(title), html.P(blurb, className="blurb")], className="page-header")


def labelled(label: str, component, width: str | None = None) -> html.Div:
    style = {"width": width} if width else {}
    return html.Div([html.Label(label), component], className="control", style=style)


def table_component(df: pd.DataFrame, id: str | None = None, page_size: int = 15, wrap: bool = True, **kwargs):
    """A sortable DataTable in the house precision (`workbench.figures.style.round_table`: key columns first,
    times to 0.1 s, accuracies and intervals to 3 decimals). `wrap`: long cells wrap onto more lines (nothing is
    cut); else cells stay one line and the key columns stay put when it scrolls sideways, each as wide as its
    longest value (ids are never cut)."""
    from dash import dash_table

    from workbench.figures.style import n_key_columns, round_table

    data = round_table(df)
    text = [c for c in data.columns if data[c].dtype == object or pd.api.types.is_string_dtype(data[c])]
    for c in text:  # text cells (e.g. a corrupt run's error) show no server paths
            data[c] = data[c].map(lambda v: redact_paths(v) if isinstance(v, str) else v if isinstance(
                v, (int, float, type(None))) else redact_paths(json.dumps(v, default=str)))
    cell = {"fontFamily": "inherit", "fontSize": "13px", "padding": "3px 8px", "textAlign": "left"}
    cell.update({"whiteSpace": "normal", "height": "auto", "maxWidth": "460px", "minWidth": "60px"} if wrap else
                {"maxWidth": "280px", "overflow": "hidden", "textOverflow": "ellipsis"})
    props = dict(columns=[{"name": c, "id": c} for c in data.columns], data=data.to_dict("records"),
                 page_size=page_size, sort_action="native",
                 style_table={"overflowX": "auto", "minWidth": "100%"}, style_cell=cell,
                 style_header={"fontWeight": "600", "backgroundColor": "#f1f3f6", "whiteSpace": "normal"}, **kwargs)
    ids = [c for c in data.columns if c in ("id", "run_id") or data[c].astype(str).str.len().max() <= 30]
    # ids and short values are one unbroken line: an id is never cut, a short label never broken
    # long text: wide enough that rows stay short
    prose = [c for c in text if wrap and c not in ids and data[c].astype(str).str.len().max() > 80]
    props["style_data_conditional"] = ([{"if": {"column_id": c}, "whiteSpace": "nowrap", "maxWidth": "none"}
                                        for c in ids] + list(props.get("style_data_conditional") or []))
    props["style_cell_conditional"] = ([{"if": {"column_id": c}, "minWidth": "380px", "width": "420px",
                                         "maxWidth": "460px"} for c in prose]
                                       + list(props.get("style_cell_conditional") or []))
    n_fixed = n_key_columns(data)
    if not wrap and n_fixed and len(data.columns) > n_fixed + 4:
        props.setdefault("fixed_columns", {"headers": True, "data": n_fixed})
        # a frozen column is as wide as its header or longest value (frozen columns do not size themselves)
        chars = {c: max(len(c), int(data[c].astype(str).str.len().max() or 0)) for c in data.columns[:n_fixed]}
        widths = [{"if": {"column_id": c}, "minWidth": f"{24 + 8 * n}px", "maxWidth": f"{24 + 8 * n}px"}
                  for c, n in chars.items()]
        props["style_cell_conditional"] = widths + list(props.get("style_cell_conditional") or [])
    if id is not None:
        props["id"] = id
    return dash_table.DataTable(**props)


# ---- job panel (long work as a Dash background callback) ----------------------------------------------
def job_panel(prefix: str, label: str = "Run", note: str | None = None) -> html.Div:
    """Run button, cancel button, progress bar and status line; wired by `apps.jobs.register_job`."""
    return html.Div([
        html.Button(label, id=f"{prefix}-job-run", className="btn btn-run", n_clicks=0),
        html.Button("Cancel", id=f"{prefix}-job-cancel", className="btn btn-cancel", n_clicks=0, disabled=True),
        html.Div([html.Progress(id=f"{prefix}-job-progress", value="0", max="100"),
                  html.Span(id=f"{prefix}-job-status", className="job-status")],
                 id=f"{prefix}-job-box", className="job-box", style={"display": "none"}),
        html.Span(note or "", className="job-note"),
        html.Div(id=f"{prefix}-job-message", className="job-message"),
        dcc.Store(id=f"{prefix}-job-result"),
    ], className="job-panel", id=f"{prefix}-job-panel")


def any_own_run(store, run_ids) -> bool:
    """Whether a job can store a table for one of `run_ids` (an id or a list): a run of your own store. A shipped
    run's tables cannot be added; its hints say how to re-create it, where it can be. Unknown or hostile ids: no."""
    ids = [run_ids] if isinstance(run_ids, str) else run_ids if isinstance(run_ids, list) else []
    for rid in ids:
        try:
            if store.store_of(rid)[0] == "own":
                return True
        except Exception:
            continue
    return False


def recreate_panel(prefix: str) -> html.Div:
    """"Re-create this run" for a live page (wired by `apps.jobs.register_recreate`): hidden unless the picked
    run is shipped without weights; a note says which run and how long it trained."""
    return html.Div([
        html.Div([html.Div(id=f"{prefix}-recreate-note"),
                  job_panel(f"{prefix}-recreate", "Re-create this run",
                            note="re-trains it from its shipped config into your store (same run id, same "
                                 "metrics); the page then uses your copy")],
                 id=f"{prefix}-recreate-box", style={"display": "none"}),
        html.Div(id=f"{prefix}-recreate-done", className="job-note"),
        dcc.Store(id=f"{prefix}-recreate-target"),
    ], className="recreate-panel")


@functools.lru_cache(maxsize=4)
def _cached_model(root: str, readonly: bool, run_id: str, stamp: str):
    from workbench.store import RunStore

    model = RunStore(root, readonly=readonly).get(run_id).load_model("cpu")
    model._pelab_lock = threading.Lock()  # hooks are added to the module itself: one forward at a time
    return model


def model_lock(model) -> threading.Lock:
    """The lock to hold while running (hooked) forwards of a cached model from a server thread."""
    return getattr(model, "_pelab_lock", None) or threading.Lock()


def load_model_cached(run):
    """The run's model, cached per (store, run, checkpoint state); use it under `model_lock(model)`."""
    return _cached_model(str(run.store.root), run.store.readonly, run.id, run.checkpoint_stamp())


def preset_disclaimer(preset: str, id: str) -> html.Details | None:
    """The scale disclaimer of the runs' preset (`presets.disclaimer`), said first: its headline and model line in
    view above the answers, the rest (data, epochs, how the optimiser was chosen, what a verdict can say) in its
    fold; None for a preset PE-Lab does not define."""
    from workbench.train.presets import PRESETS, disclaimer

    if preset not in PRESETS:
        return None
    d = disclaimer(preset)
    headline = [html.Code(x) if k % 2 else x for k, x in enumerate(d.headline.split("`"))]  # `repro` as code
    return html.Details([html.Summary([html.Strong(headline), " ", d.lead,
                                       html.Span(" What else differs, and what a verdict here can say",
                                                 className="fold-more")]),
                         dcc.Markdown("\n".join(f"- {x}" for x in d.points))],
                        className="disclaimer", id=id)
