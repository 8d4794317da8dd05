"""COMPARISON.md: the reproduction of the core paper, written from a results store's tables alone.

    text = comparison_markdown(store)       # deterministic: the same tables give the same bytes
    write_comparison(store, path)

Sections: what was run, Table 1 side by side, the questions asked of the reproduction, every qualitative claim
with its verdict and evidence, where the label becomes decodable, every scheme at a glance, partial RoPE, one
setting at a time, the thresholds, what differs from the paper's setup (computed from the presets), provenance,
and the run list. The registered rules and the seed study's sections are written by `report.study`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workbench.analysis.claims import (BASE, GAP_CLOSER, NOT_SPECIFIC, OUTCOME_RULES, SETTINGS, BaseClaims, StatusRules,
                                       Thresholds, accuracy_text, all_deposits, answers, base_claims, decodable_layers,
                                       ladder_gaps, ladder_table1, one_setting, one_setting_effect, partial_rope_pairs,
                                       rung_seed_cells, run_table, scheme_overview, seed_verdict, status_settled,
                                       table1, thresholds_table, verdict_summary)
from workbench.analysis.claims.registry import load_registry
from workbench.analysis.common import scheme_label, task_label, tuples
from workbench.analysis.experiments import PAPER_TABLE1
from workbench.store import atomic_write_text
from workbench.store.runstore import DEFAULT_DATA_SEED

from .markdown import VERDICT_MARK, links, mark, md_table, pct
from .study import registration_commits, registration_section, study_lines, study_section


def status_legend(sr: StatusRules) -> str:
    """What the run statuses mean, from the registered run rules (COMPARISON.md's Table 1, the README block)."""
    return (f"*ceiling*: >= {100 * sr.ceiling:g} %; *not settled*: its test accuracy moved >= "
            f"{100 * sr.settle_points:g} point{'' if 100 * sr.settle_points == 1 else 's'} between epoch "
            "max(1, floor(E/2)) and its last epoch E; *still learning*: not settled and below the ceiling; "
            f"*did not learn*: the Wilson lower bound of its test accuracy below the reference + {sr.learned_share:.2f}"
            " x the room above it")


def _table1_section(t1: pd.DataFrame) -> str:
    if t1.empty:
        return "No MLA / RoPE / NoPE run has finished yet.\n"
    scale = "paper_scale" in t1
    rows = []
    for (setting, scheme), g in t1.groupby(["setting", "scheme"], sort=False):
        cells = [SETTINGS[setting], scheme_label(scheme)]
        for task in ("trigger-distance", "trigger-count"):
            r = g[g.task == task]
            cells += [pct(PAPER_TABLE1.get((scheme, task), np.nan)), accuracy_text(r.iloc[0]) if len(r) else "no run"]
            if scale:
                cells.append(r.paper_scale.iloc[0] if len(r) else "no run")
        rows.append(cells)
    order = {k: i for i, k in enumerate(SETTINGS)}
    rows.sort(key=lambda c: (order[[k for k, v in SETTINGS.items() if v == c[0]][0]], c[1]))
    header = ["setting", "scheme"]
    for task in ("Task 1", "Task 2"):
        header += [f"{task} paper", f"{task} PE-Lab: mean (seed range)"] + ([f"{task} PE-Lab at paper scale"]
                                                                              if scale else [])
    return md_table(header, rows) + "\n\nPer-seed test accuracies, and what the runs can show:\n\n" + md_table(
        ["setting", "scheme", "task", "rests on", "seeds (test accuracy, %)", "runs"],
        [[SETTINGS[r.setting], scheme_label(r.scheme), task_label(r.task), r.rests_on, r.seeds, r.status]
         for r in tuples(t1)]) + "\n"


def _questions_section(cl: pd.DataFrame, scale: pd.DataFrame | None = None) -> str:
    """Each question of `claims.answers`, answered per setting (and task), with the evidence; then the scale
    ladder's questions (`claims.ladder_answers`), answered per rung."""
    lines = []
    for question, g in answers(cl).groupby("question", sort=False):
        lines.append(f"- **{question}**")
        lines += [f"  - {r.setting}: **{r.answer}** ({r.verdict}). {r.evidence}" for r in tuples(g)]
    for question, g in ([] if scale is None else scale.groupby("question", sort=False)):
        lines.append(f"- **{question}** (the scale ladder)")
        lines += [f"  - at `{r.rung}`: **{r.answer}**. {r.evidence}" for r in tuples(g)]
    return "\n".join(lines) + "\n"


def _verdict_cell(r, th: Thresholds) -> str:
    """The verdict at the deciding threshold, "(few runs)" under the registered minimum, and the flags: the verdict
    at the second threshold (`th.also`) where it differs (threshold-sensitive) and the specificity check."""
    few = " (few runs)" if getattr(r, "few_runs", False) and r.verdict in VERDICT_MARK else ""
    cell = mark(r.verdict) + few + (f" (seeds: {r.result})" if r.verdict == "beyond the paper" else "")
    if getattr(r, "threshold_sensitive", False):
        cell += f"; *threshold-sensitive*: at {th.also:.2f} {r.verdict_also}"
    if getattr(r, "specificity", "") == "not specific" and NOT_SPECIFIC not in (r.verdict, getattr(r, "result", "")):
        cell += "; *not specific*"
    return cell


def _claims_section(cl: pd.DataFrame, th: Thresholds) -> str:
    scale, paper = "holds_across_scale" in cl, "paper_scale" in cl
    rows = [[r.claim, f"`{r.claim_id}`" if getattr(r, "claim_id", "") else "PE-Lab's own",
             SETTINGS.get(r.setting, r.setting), _verdict_cell(r, th), getattr(r, "rests_on", "") or "–",
             getattr(r, "specificity", "") or "–", r.evidence]
            + ([r.holds_across_scale] if scale else []) + ([r.paper_scale] if paper else [])
            + [links(r.runs, 3) if len(r.runs) else ""] for r in tuples(cl)]
    header = ["claim", "registered rule", "setting", "verdict", "rests on", "specificity", "evidence"] \
        + (["holds across scale"] if scale else []) + (["at paper scale"] if paper else []) + ["runs"]
    return f"Verdicts: {verdict_summary(cl)}.\n\n" + md_table(header, rows) + "\n"


def _outcomes_section() -> str:
    return "\n".join(f"- *{k}*: {v}" for k, v in OUTCOME_RULES.items()) + "\n"


def _deposits_section(d: pd.DataFrame, runs_all: pd.DataFrame) -> str:
    """The deposit table, then the shipped runs that have none (metrics only), so a missing run is never silent."""
    missing = sorted(set(runs_all.run_id) - set(d.run_id))
    note = ("" if not missing else
            f"\nShipped without a deposit table (metrics only: their accuracies count, no deposit of theirs is "
            f"shown or judged; `workbench recreate RUN_ID`, then `workbench ship RUN_ID`, adds it): "
            f"{links(missing, len(missing))}.\n")
    if d.empty:
        return "No shipped run has a deposit table yet.\n" + note
    rows = [[f"`{r.preset}`", SETTINGS.get(r.setting, r.setting), r.variant, task_label(r.task), str(r.seed), r.status,
             r.deposits, links([r.run_id], 1)] for r in tuples(d)]
    return md_table(["preset", "setting", "variant", "task", "seed", "run", "single-head deposits", "run id"],
                     rows) + "\n" + note


def _undecided_why(status: str) -> str:
    """Why a ladder cell closer to (or further from) the paper cannot tell: its run is still moving, or it settled
    without learning (closer to the paper's number, but only a run that learned explains a gap)."""
    if status_settled(status):
        return f"{status}: closer, but only a run that learned and settled can explain a gap"
    return f"{status}: more epochs may move it"


def _ladder_section(runs_all: pd.DataFrame, lad: pd.DataFrame, rungs, seeded: pd.DataFrame | None = None) -> str:
    """Table 1's cells at each rung (seed 42), the claims whose verdict changes at a rung, and which differences
    from the paper the ladder explains: a cell explains a gap when moving to a rung brings it >= 5 points closer
    to the paper's number; a cell that does not, and whose run at the rung was still learning, cannot tell yet; a
    cell already within 5 points of the paper at the base has no gap to explain.
    `seeded` (`claims.rung_claims`): the claims at rungs run with more seeds, on all of them."""
    t = ladder_table1(runs_all, rungs)
    if t.empty:
        return ("No run of the ladder's other rungs is shipped yet: `workbench sweep grids/ladder.toml --root "
                "runs-repro`, then ship (docs/reproduction.md#the-scale-ladder).\n")
    rows = [[SETTINGS.get(d["setting"], d["setting"]), scheme_label(d["scheme"]), task_label(d["task"]),
             pct(d["paper"])] + ["–" if not np.isfinite(d[rung]) else f"{pct(d[rung])} ({d[rung + ' status']})"
                                  for rung in rungs] for d in t.to_dict("records")]
    gaps = ladder_gaps(t, rungs)
    what = {g: [] for g in ("explains", "does not explain", "cannot tell yet", "closer, unexplainable", "no gap")}
    for r in tuples(gaps):
        # a closer cell whose run did not learn (or diverged) is settled: no more epochs make it explain the gap
        group = "closer, unexplainable" if r.gap == "cannot tell yet" and status_settled(r.status) else r.gap
        what[group].append(f"{SETTINGS.get(r.setting, r.setting)} {scheme_label(r.scheme)} {task_label(r.task)} at "
                           f"{r.rung}: {pct(r.base)} -> {pct(r.acc)} (paper {pct(r.paper)})"
                           + (f" ({_undecided_why(r.status)})" if r.gap == "cannot tell yet" else ""))
    explained, unexplained, undecided = what["explains"], what["does not explain"], what["cannot tell yet"]
    head = ["setting", "scheme", "task", "paper"] + [f"`{x}` (seed 42)" for x in rungs]
    out = [md_table(head, rows), ""]
    changed = lad[(lad.rung != rungs[0]) & (lad.verdict != "pending")]
    base_v = {(r.claim, r.setting): r.result for r in tuples(lad[lad.rung == rungs[0]])}
    moves = [f"- {r.claim} ({SETTINGS.get(r.setting, r.setting)}): `{rungs[0]}` "
             f"{seed_verdict(base_v.get((r.claim, r.setting), '–'))} -> `{r.rung}` {seed_verdict(r.result)}"
             + (" (beyond the paper)" if r.verdict == "beyond the paper" else "")
             for r in tuples(changed) if base_v.get((r.claim, r.setting)) != r.result]
    out += ["Claims whose seed-42 outcome changes at a rung (every row, \"beyond the paper\" rows included):", ""] \
        + (moves or ["- none so far"]) + [""]
    pts = f"{100 * GAP_CLOSER:g} points"
    out += [f"Differences from the paper the ladder explains (a rung brings the cell >= {pts} closer to the "
            "paper's number, and its run learned and settled: the status checks come first):", ""] \
        + ([f"- {x}" for x in explained] or ["- none so far"]) + [""]
    out += [f"Differences it does not explain (no rung run so far moves the cell >= {pts} closer):", ""] \
        + ([f"- {x}" for x in unexplained] or ["- none"]) + [""]
    if undecided:
        out += ["Cannot tell yet (the run at the rung did not pass the status checks, first by the registered "
                "rule, and has not settled):", ""] + [f"- {x}" for x in undecided] + [""]
    if what["closer, unexplainable"]:
        out += ["Closer, but not an explanation by the registered rule (the run at the rung settled without "
                "learning the task: only a run that learned and settled explains a gap; where the paper's own number "
                "is below the bar for learning, as NoPE's on Task 1, no run at any rung can):", ""] \
            + [f"- {x}" for x in what["closer, unexplainable"]] + [""]
    if what["no gap"]:
        out += [f"No difference to explain (at `{rungs[0]}` the cell is already within {pts} of the paper's "
                "number):", ""] + [f"- {x}" for x in what["no gap"]] + [""]
    if seeded is not None and len(seeded):
        cells = [f"- {SETTINGS.get(setting, setting)} {scheme_label(variant)} {task_label(task)} at `{rung}`: "
                 + ", ".join(f"seed {r.seed} {pct(r.test_acc)} ({r.status})" for r in tuples(g))
                 for (rung, setting, variant, task), g in
                 rung_seed_cells(runs_all, rungs).groupby(["rung", "setting", "variant", "task"], sort=False)]
        out += ["Where seed 42's verdict changed, the rung is run with seeds 43 and 44 too; its claims on every seed "
                "(the rules of the claims above: a share needs four counted runs, an ordering three pairs):", ""] \
            + cells + [""]
        out += [md_table(["rung", "claim", "setting", "verdict", "evidence"],
                          [[f"`{r.rung}`", r.claim, SETTINGS.get(r.setting, r.setting), mark(r.verdict), r.evidence]
                           for r in tuples(seeded)]), ""]
    return "\n".join(out)


def _decodable_section(store, runs: pd.DataFrame) -> str:
    d = decodable_layers(store, runs)
    if d.empty:
        return "No shipped run has a probes table yet.\n"
    rows = []
    for (setting, variant, task), g in d.groupby(["setting", "variant", "task"]):
        layers = ", ".join(f"seed {r.seed}: {'never' if pd.isna(r.first_layer) else int(r.first_layer)}"  # None too
                           f" (best {r.best_score:.2f})" for r in tuples(g))
        rows.append([SETTINGS.get(setting, setting), variant, task_label(task), layers])
    old = int(d["solved_before"].sum())
    note = ""
    if old:  # two solvers behind one table: said, with what their difference is
        from workbench.analysis.reproduce import SOLVER_CHANGE as c

        note = (f"\n{old} of these {len(d)} runs {'was' if old == 1 else 'were'} analysed by code without "
                f"{c.commit} ({c.landed[:10]}; shipped before it, or from a branch without it), so their probes "
                "come from the former solver and the others' from today's. "
                f"What changed: {c.what}. `workbench verify` recomputes a run's probes and says how far apart the "
                "two are; `workbench verify --refresh` re-makes them where a re-training is bit-identical "
                "(docs/reproduction.md).\n")
    return md_table(["setting", "variant", "task", "first decodable layer per seed (best accuracy)"], rows) + "\n" \
        + note


def _one_setting_section(d: pd.DataFrame) -> str:
    if d.empty:
        return "No run of tier 4 has finished yet.\n"
    rows = [[SETTINGS.get(r.setting, r.setting), f"{r.base} -> {r.variant}", r.change, task_label(r.task),
             pct(r.base_acc), pct(r.acc),
             f"{100 * r.delta:+.2f}" + ("" if r.n_seeds < 2 else f" [{100 * r.delta_lo:+.2f}, {100 * r.delta_hi:+.2f}]")
             + f" ({r.n_seeds} seed{'s' if r.n_seeds > 1 else ''}; {one_setting_effect(r)})", r.base_deposit, r.deposit,
             links(r.runs, 2)] for r in tuples(d)]
    return md_table(["setting", "variant", "field changed", "task", "baseline test acc %", "changed test acc %",
                      "difference (points)", "baseline deposits", "changed deposits", "runs"], rows) + "\n"


def _overview_section(d: pd.DataFrame) -> str:
    if d.empty:
        return "No run of the `paper` arch has finished yet.\n"
    rows = []
    for r in tuples(d):
        ci = f" [{pct(r.lo)}, {pct(r.hi)}]" if r.n_seeds < 2 else f" ({pct(r.lo)}-{pct(r.hi)})"
        rows.append([scheme_label(r.scheme), task_label(r.task), str(r.n_seeds), pct(r.mean) + ci, r.status,
                     r.deposit, links(r.runs, 3)])
    return md_table(["scheme", "task", "seeds", "test acc % (mean (seed range) or [Wilson 95 %])", "runs can show",
                      "single-head deposits", "runs"], rows) + "\n"


def _partial_rope_section(d: pd.DataFrame, grid: str = "grids/repro.toml") -> str:
    if d.empty:
        return f"No partial-RoPE run has finished yet (tier 2 of {grid}).\n"
    rows = [[r.variant, str(r.rope_heads), r.rope_layers, task_label(r.task), str(r.n_seeds), pct(r.acc),
             pct(r.full_acc), r.deposit, r.deposits_on_rope_heads, r.full_deposit, links(r.runs, 2)]
            for r in tuples(d)]
    return md_table(["variant", "RoPE heads k", "RoPE layers", "task", "seeds", "test acc %", "full RoPE test acc %",
                      "single-head deposits", "deposits on a RoPE head", "full RoPE's deposits", "runs"], rows) + "\n"


def _scale_section(runs: pd.DataFrame, rungs: tuple[str, ...]) -> str:
    """The paper's setup beside each preset the runs use (the ladder's `rungs` first), one column per preset."""
    from workbench.train.presets import PRESETS, preset_task_spec

    presets = [p for p in rungs if p in set(runs.preset.dropna())] or [rungs[0]]
    presets += sorted(p for p in set(runs.preset.dropna()) - set(presets) if p in PRESETS)

    def column(name: str) -> list[str]:
        q = PRESETS[name]
        cells = [str(q["model"][k]) for k in ("n_layers", "n_heads", "d_model", "d_ff", "dropout")]
        cells += [str(q["train"].get(k)) for k in ("lr", "batch_size", "batching")]
        for task in ("trigger-distance", "trigger-count"):
            s, epochs = preset_task_spec(name, task)
            cells += [str(epochs), str(s.n_classes), str(s.vocab_size), str(s.n_examples), str(s.max_tokens)]
        return cells

    names = ["model.n_layers", "model.n_heads", "model.d_model", "model.d_ff", "model.dropout", "train.lr",
             "train.batch_size", "train.batching"]
    for task in ("trigger-distance", "trigger-count"):
        names += [f"{task_label(task)} {k}" for k in ("epochs", "labels", "vocab_size", "n_examples", "max_tokens")]
    cols = [column(p) for p in ("paper", *presets)]
    rows = [[n] + [c[i] for c in cols] for i, n in enumerate(names)]
    return md_table(["setting", "paper (docs/paper.md)"] + [f"`{p}`" for p in presets], rows) + "\n"


def _vendor_level(runs: pd.DataFrame) -> pd.Series:
    """Each run's CPU vendor and SIMD level ("AuthenticAMD at AVX2"); the CPU model where the run predates both."""
    who = runs.cpu_vendor.fillna(runs.cpu).fillna("unknown CPU")
    return (who + " at " + runs.simd.astype(str)).where(runs.simd.notna(), who + ", level not recorded")


def _registered_before(runs: pd.DataFrame, registered: str) -> str:
    """Whether the registration (a date) came before every run judged here started (run.json `started`, UTC):
    the sentence that says so, with the first run's start."""
    started = pd.to_datetime(runs["started"], utc=True, errors="coerce").dropna() if len(runs) else pd.Series()
    if started.empty:
        return "and no run here records when it started: whether the rules came before them cannot be told."
    first = started.min()
    if first.normalize() > pd.Timestamp(registered, tz="UTC"):
        return (f"before the first run here started ({first:%Y-%m-%d %H:%M} UTC): these runs are judged by rules "
                "fixed before them.")
    return (f"not before the first run here started ({first:%Y-%m-%d %H:%M} UTC): for the runs trained by then the "
            "rules are a stricter re-reading, not a prediction.")


def _rules_when(runs: pd.DataFrame) -> str:
    """'The rules were registered on DATE, ' + whether that came before these runs (`_registered_before`)."""
    registered = load_registry().registered
    return f"The rules were registered on {registered}, " + _registered_before(runs, registered)


def _tables_made_before(store, runs: pd.DataFrame) -> list[str]:
    """Provenance lines on the tables: how many runs hold a table made before its analysis changed its numbers
    (`reproduce.stale_tables`, per table), and which runs' tables were refreshed from a re-training whose metrics
    equal the shipped ones (`workbench verify --refresh`, run.json `refreshed`)."""
    from collections import Counter

    from workbench.analysis.reproduce import stale_tables

    stale, refreshed, when, n = Counter(), Counter(), [], 0
    for rid in runs.run_id:
        run = store.get(rid)
        stale.update(stale_tables(run))
        records = run.info.get("refreshed") or []
        n += bool(records)
        for r in records:
            refreshed.update(r.get("tables") or [])
            when.append(str(r.get("refreshed", ""))[:10])
    lines = ["- tables made before their analysis changed its numbers (`reproduce.CHANGES`: made by code without "
             "the change, by git ancestry; `workbench verify` compares them with a re-computation and does not "
             "judge them; `--refresh` re-makes them): "
             + (", ".join(f"{t} of {n} run{'s' * (n != 1)}" for t, n in sorted(stale.items())) if stale
                else "none")]
    if when:
        span = min(when) if min(when) == max(when) else f"{min(when)} to {max(when)}"
        lines.append(f"- tables refreshed from a re-training whose metrics equal the shipped ones at every epoch "
                     f"(`workbench verify --refresh`, run.json `refreshed`; {span}): {n} run{'s' * (n != 1)}: "
                     + ", ".join(f"{t} of {k}" for t, k in sorted(refreshed.items())))
    return lines


def _provenance_section(runs: pd.DataFrame, store=None) -> str:
    lines = [f"- runs: {len(runs)} finished; total wall time {runs.wall_time_s.sum() / 3600:.2f} h, "
             f"CPU time {runs.cpu_time_s.sum() / 3600:.2f} h "
             f"(per run: median wall {runs.wall_time_s.median():.0f} s, max {runs.wall_time_s.max():.0f} s; "
             f"median CPU {runs.cpu_time_s.median():.0f} s, max {runs.cpu_time_s.max():.0f} s: the wall time "
             "depends on what else the machine ran, the training process's CPU time does not; a run trained in a "
             "pack of K seeds counts 1/K of its pack's process)",
             "- code versions: " + ", ".join(f"`{v}` ({n})" for v, n in runs.code_version.value_counts().items()),
             "- machines: " + ", ".join(f"{v} ({n})" for v, n in runs.cpu.fillna("unknown").value_counts().items())]
    gpu = runs["gpu"].dropna() if "gpu" in runs else pd.Series(dtype=object)
    if len(gpu):
        lines.append("- trained on a GPU: " + ", ".join(f"{v} ({n})" for v, n in gpu.value_counts().items())
                     + " (run.json `gpu`, recorded since 2026-11-27); under bf16 autocast a GPU re-training is not "
                     "bit-identical: `workbench verify` judges one by its rule for other numerics "
                     "(docs/reproduction.md)")
    cpu = runs[runs["gpu"].isna()] if "gpu" in runs else runs
    if len(cpu):
        lines.append("- where a re-training can equal a CPU run bit for bit (`workbench verify`; "
                     "docs/reproduction.md): "
                     "on a CPU of the same vendor at the same SIMD level ATen dispatched to (with the same torch build "
                     "and the run's thread count); a lower level is held by `recreate`, a higher one no machine below "
                     "it can run. By vendor and level: "
                     + ", ".join(f"{v} ({n})" for v, n in _vendor_level(cpu).value_counts().items()))
    lines.append("- torch threads per run: " + ", ".join(f"{v} ({n})" for v, n in
                                                          runs.threads.astype(str).value_counts().items()))
    dirty = runs[runs.code_version.astype(str).str.endswith("-dirty")]
    with_diff = dirty[dirty.code_diff == True] if "code_diff" in dirty else dirty.iloc[:0]  # noqa: E712 (NaN)
    without = dirty.drop(with_diff.index)
    lines.append(f"- trained from a dirty tree (run.json `code_version` ending `-dirty`: uncommitted changes): "
                 f"{len(dirty)} of {len(runs)}" + (
                     f"; {len(with_diff)} ship the diff they were trained with (code.diff: their commit with it "
                     "applied re-creates them): " + ", ".join(f"`{r.run_id}` (`{r.code_version}`)"
                                                               for r in tuples(with_diff)) if len(with_diff) else "")
                 + (f"; {len(without)} shipped without it (before `ship` required it), so `workbench recreate` "
                    "may not re-create them bit for bit: "
                    + ", ".join(f"`{r.run_id}` (`{r.code_version}`)" for r in tuples(without)) if len(without) else ""))
    resumed = runs[runs.resumed_otherwise.notna()] if "resumed_otherwise" in runs else runs.iloc[:0]
    lines.append(f"- resumed from a checkpoint under other settings than it started with (run.json "
                 f"`resumed_settings`; run.json's other fields are the first session's, the epochs after the "
                 f"checkpoint ran the later; `git diff A B -- workbench/train workbench/model synthetic_tasks` shows "
                 f"what changed in its training code): {len(resumed)} of {len(runs)}"
                 + (": " + ", ".join(f"`{r.run_id}` ({r.resumed_otherwise})" for r in tuples(resumed))
                    if len(resumed) else ""))
    if store is not None:
        lines += _tables_made_before(store, runs)
    return "\n".join(lines) + "\n"


def _runs_section(runs: pd.DataFrame) -> str:
    rows = [[f"[{r.run_id}]({r.run_id}/)", SETTINGS.get(r.setting, r.setting), r.variant, task_label(r.task),
             str(r.seed), f"{r.test_acc:.4f}", f"{r.train_acc:.4f}", str(r.epochs), f"{r.wall_time_s:.0f}",
             f"{r.cpu_time_s:.0f}", str(r.threads)] for r in tuples(runs)]
    return md_table(["run", "setting", "variant", "task", "seed", "test acc", "train acc", "epochs", "wall s",
                      "CPU s", "threads"], rows) + "\n"


def _corrupt_section(corrupt: dict[str, str], n_read: int) -> list[str]:
    """Runs of the store whose files cannot be read (`workbench.store.finished_runs`): listed with the reason,
    left out of every number below."""
    if not corrupt:
        return []
    return ["## Runs that could not be read", "",
            f"{len(corrupt)} run folder(s) here are damaged; everything below is computed from the other {n_read} "
            "runs without them (re-ship them, or `workbench recreate RUN_ID`, to bring them back):", ""] + \
        [f"- `{rid}`: {' '.join(why.split())}" for rid, why in sorted(corrupt.items())] + [""]


def _head_parts(judged: BaseClaims, cl: pd.DataFrame, gpu: bool, pending: list[str] | None) -> list[str]:
    """COMPARISON.md's title, scale disclaimer, verdict summary, what was run and what is still to run."""
    from workbench.train.presets import scale_disclaimer

    base, runs, runs_all = judged.base, judged.runs, judged.runs_all
    return [
        f"# The core paper at the `{base}` preset ({'GPU' if gpu else 'CPU'}): comparison",
        "",
        scale_disclaimer(base),
        "",
        "Generated by `workbench compare` from the tables shipped in this folder (no weights, nothing re-run); "
        "do not edit by hand. Paper: *spectral analysis of content-position coupling* (docs/paper.md). "
        "Each run folder here holds its config, provenance (run.json), metrics and analysis tables; "
        f"`workbench recreate RUN_ID` re-trains any of them{' on a machine with a CUDA GPU' if gpu else ''} and "
        "`workbench verify RUN_ID` checks the re-run against these numbers"
        f"{' (by its rule for other numerics: GPU kernels are not bit-reproducible)' if gpu else ''}.",
        "",
        f"**Verdicts at `{base}`:** {verdict_summary(cl)}. {_rules_when(runs)}",
        "",
        "## What was run",
        "",
        md_table(["preset", "setting", "task", "variants", "runs"],
                  [[f"`{p}`", SETTINGS.get(s, s), task_label(t), ", ".join(sorted(set(g.variant))), str(len(g))]
                   for (p, s, t), g in runs_all.groupby(["preset", "setting", "task"])]) if len(runs_all)
        else "Nothing yet.",
        "",
    ] + (["**Still to run** (the grid resumes where it stopped):", ""] + [f"- {p}" for p in pending] + [""]
         if pending else []) + _corrupt_section(runs_all.attrs.get("corrupt", {}), len(runs_all))


def _results_parts(judged: BaseClaims, t1: pd.DataFrame, cl: pd.DataFrame, th: Thresholds, gpu: bool, paper_root,
                   label: str | None) -> list[str]:
    """Table 1, the questions answered so far and the paper's claims with their verdicts."""
    from workbench.report.paper_scale import paper_scale_note

    base, sr = judged.base, StatusRules()  # the registered run rules, as the verdicts read them
    return [
        "## Table 1: test accuracy (%)",
        "",
        f"The paper's numbers (one run each) next to PE-Lab's at `{base}`: the mean over seeds with the seeds' "
        "range (smallest-largest; with one seed, the Wilson 95 % interval of its test set), and what each run can "
        f"show, by the registered run rules ({status_legend(sr)}), and how many training and data seeds each cell "
        "rests on. The authors ran MLA in a "
        "different script and architecture from RoPE and NoPE (docs/paper.md): the rows of the `paper` architecture "
        "compare all three in one architecture with one set of settings.",
        "",
        paper_scale_note(paper_root, label),
        _table1_section(t1),
        "## The questions, answered so far",
        "",
        "From the claims below (their verdicts and evidence); an answer changes as the grid's seeds come in. The "
        "scale ladder's questions are answered at each rung run so far, on every seed run there (one seed cannot "
        "tell).",
        "",
        _questions_section(cl, None if gpu else judged.answers),
        "## The paper's claims",
        "",
        "One row per claim and setting; only *reproduced*, *mixed* and *not reproduced* count as tests of the paper. "
        "The outcomes:",
        "",
        _outcomes_section(),
        f"Deposits use the spec's definition (a single-head deposit at layer l: top accuracy drop >= "
        f"{th.indispensable:.2f}, >= 3x "
        "the layer's second, bootstrap interval of the gap above 0) on zero-ablation of each head's `hook_z`; "
        "L*l*.H*h* = layer l, head h (0-based); only runs that learned the task and settled count (a ceiling run is "
        f"not exempt); the decision reads {th.indispensable:.2f}, the verdict at {th.also:.2f} is in the evidence and "
        "flagged *threshold-sensitive* where it differs; *specificity*: "
        "the same rule applied to the scheme the paper contrasts the claim with (*not specific* when it passes too; "
        "since version 3 a *reproduced* needs it to fail, *specific*)."
        + ("" if gpu else " *Holds across scale*: the "
           f"claim's seed-42 verdict at each other rung of the scale ladder against `{base}`'s seed-42 verdict, said "
           "as one seed's (\"seed 42 agrees with the paper\": one seed cannot reproduce a claim), then the verdict "
           "on every seed run at that rung where it was run with more."),
        "",
        _claims_section(cl.drop(columns=["holds_across_scale"], errors="ignore") if gpu else cl, th),
    ]


def _registration_parts(judged: BaseClaims, cl: pd.DataFrame, gpu: bool) -> list[str]:
    """The registration: each rule with the commit that registered it, and which runs it could not have seen."""
    base, runs_all = judged.base, judged.runs_all
    return [
        "## The registration",
        "",
        "Every rule above is the registered one (docs/preregistration.md; `workbench/analysis/claims/registry.toml`), "
        "named here with the commit that registered it. The registration was committed on "
        f"{load_registry().registered}, "
        + (_registered_before(runs_all, load_registry().registered) if gpu else
           f"before the seed study trained any run and after the runs at `{base}` and the scale ladder were "
           "trained: for those runs the rules are a stricter re-reading, not a prediction; only the seed study is "
           "judged by rules fixed before its runs.")
        + " A rule changed later keeps its id, bumps its version and is flagged where it changed after the runs it "
        "judges were trained.",
        "",
        registration_section(cl, runs_all, registration_commits()),
    ]


def _study_and_ladder_parts(judged: BaseClaims, gpu: bool) -> list[str]:
    """The seed study's readouts and the scale ladder (a paper-scale store only points to the CPU store's)."""
    from workbench.train.presets import PRESETS

    if gpu:
        return ["## The seed study and the scale ladder", "",
                "Both are CPU grids at the `repro` presets (docs/preregistration.md, docs/reproduction.md), shipped to "
                "results/repro: their verdicts are in its COMPARISON.md (`../repro/COMPARISON.md`). None of their "
                "runs is in this folder.", ""]
    rungs = judged.rungs
    return [
        "## The seed study",
        "",
        study_section(judged.study, judged.runs_all, judged.tier2, judged.tiers),
        "## The scale ladder",
        "",
        f"The deciding settings re-run (seed 42) at presets that each move one thing of `{judged.base}` towards the "
        "paper (grids/ladder.toml; costs in docs/reproduction.md):",
        "",
        *[f"- `{r}`: {PRESETS[r]['doc'].removeprefix('scale ladder: ')}" for r in rungs[1:]],
        "",
        _ladder_section(judged.runs_all, judged.ladder, rungs, judged.seeded),
    ]


def _analyses_parts(store, judged: BaseClaims, th: Thresholds) -> list[str]:
    """Every deposit, where the label first becomes decodable, every scheme, partial RoPE, one setting at a time, and
    the thresholds."""
    from workbench.analysis.settings import reproduction_grid

    base, runs, runs_all = judged.base, judged.runs, judged.runs_all
    return [
        "## Every single-head deposit",
        "",
        "Every deposit the spec's rule finds, in every shipped run with a deposit table, whatever claim reads it.",
        "",
        _deposits_section(all_deposits(store, runs_all), runs_all),
        "## Where the label first becomes linearly decodable",
        "",
        "Per run, the first layer whose pooled stream (the model's own readout of `blocks.{l}.hook_resid_post`) "
        "predicts the label with a cross-validated logistic probe at >= 50 % accuracy and above its shuffled-label "
        "control (layer -1: the embedded input; `probes` table, docs/analyses.md).",
        "",
        _decodable_section(store, runs),
        "## Every scheme at a glance",
        "",
        f"Each scheme in PE-Lab's `paper` arch at `{base}` (tier 1's nine, 3 seeds; tier 3's schemes of the "
        "other papers, seed 42): test accuracy, what the runs can show, and the single-head deposits per seed "
        "(layer, head, zero-ablation drop; layers counted from 0).",
        "",
        _overview_section(scheme_overview(store, runs)),
        "## Partial RoPE",
        "",
        "RoPE on the first k heads of every layer (the authors' partial-RoPE script) or of one layer only (the "
        "paper's appendix C.3), NoPE on the other heads, in the `paper` arch; beside each, full RoPE on the same "
        "task and seeds: test accuracy and the single-head deposits (layer, head, zero-ablation drop; layers "
        "counted from 0), and how many of the partial run's deposits sit on a head that has RoPE.",
        "",
        _partial_rope_section(partial_rope_pairs(store, runs), reproduction_grid(base)),
        "## One setting at a time",
        "",
        "Where the authors' setup and PE-Lab's `paper` arch disagree, the cause is shown by changing one field: "
        "each row is a run of the authors' setting with one field set back to PE-Lab's value (tier 4 of "
        f"{reproduction_grid(base)}; docs/fidelity.md says what each field does), next to the authors' setting itself "
        "(same task and seed): both runs' test accuracy and single-head deposits (layer, head, zero-ablation "
        "drop), so a setting that moves the deposit shows as well as one that moves the accuracy. A single-seed "
        "difference within the baseline's seed spread (the range of its three seeds) is not an effect. The change "
        "column is computed from the two runs' config.json (a field a later version of PE-Lab added with the value "
        "that older runs trained with, such as `train.fused_attention: false`, is not a change).",
        "",
        _one_setting_section(one_setting(store, runs)),
        "Thresholds used above (claims, and the run rules of `workbench/analysis/claims/status.py`):",
        "",
        md_table(["threshold", "value"], [[r.threshold, str(r.value)] for r in tuples(thresholds_table(th))]),
        "",
    ]


def _setup_parts(store, judged: BaseClaims, gpu: bool) -> list[str]:
    """What differs from the paper's setup, provenance and the runs."""
    runs_all, rungs = judged.runs_all, judged.rungs
    return [
        "## What differs from the paper's setup",
        "",
        ("These runs were trained on a GPU (each short lent window trains a few: docs/training.md) at the paper's "
         "own setup: its model, data, epochs and optimiser" if gpu else
         "These runs were trained on 2 CPU cores (a GPU is lent to this project only now and then, for minutes, "
         "too short for a paper-scale tier: docs/training.md), so the reproduction keeps the paper's shape "
         "(6 layers x 16 heads, the `paper` architecture, both tasks) and scales width, data and epochs down to "
         "what 2 CPU cores train in minutes")
        + ". Side by side (from the presets in `workbench/train/presets.py` and the task presets in "
        "`synthetic_tasks/specs.py`):",
        "",
        _scale_section(runs_all, rungs),
        "Other differences: the paper's data were words from a subword tokenizer that is not published; PE-Lab "
        "draws token ids directly. The paper reports one run per setting; PE-Lab's grids order seeds 42, 43, 44"
        + (" (the runs shipped so far: *What was run* above); they trained under bf16 autocast, with the attention "
           "dropout inside the attention kernel, which the paper does not report." if gpu else "."),
        "",
        "## Provenance",
        "",
        _provenance_section(runs_all, store) if len(runs_all) else "Nothing yet.\n",
        "## Runs",
        "",
        _runs_section(runs_all) if len(runs_all) else "Nothing yet.\n",
    ]


def comparison_markdown(store, th: Thresholds = Thresholds(), pending: list[str] | None = None,
                        paper_root: str | Path | None = None, judged: BaseClaims | None = None) -> str:
    """The whole document, from the store's finished runs and their stored tables: the `repro` preset's runs for
    Table 1 and the claims, the scale ladder's other rungs beside them, and the paper-scale column from the
    GPU runs in `paper_root` (default: `paper/` beside the store, i.e. results/paper; "not run yet" without)."""
    from workbench.report.paper_scale import with_paper_scale_claims, with_paper_scale_table1
    from workbench.store import paper_root as beside
    from workbench.train.presets import LADDER

    label = None if paper_root is not None else "results/paper (`paper/` beside this folder)"
    paper_root = beside(store.root) if paper_root is None else paper_root
    judged = base_claims(store, run_table(store), LADDER, th) if judged is None else judged
    t1, cl = table1(judged.runs), judged.claims
    if paper_root is not None:  # None: this store is the paper-scale one, with nothing beside it
        t1, cl = with_paper_scale_table1(t1, paper_root), with_paper_scale_claims(cl, paper_root)
    gpu = judged.base == "paper"  # the paper's own scale is trained on a GPU (docs/training.md)
    return "\n".join(_head_parts(judged, cl, gpu, pending) + _results_parts(judged, t1, cl, th, gpu, paper_root, label)
                     + _registration_parts(judged, cl, gpu) + _study_and_ladder_parts(judged, gpu)
                     + _analyses_parts(store, judged, th) + _setup_parts(store, judged, gpu))


def pending_points(store, grid_path, runs: pd.DataFrame | None = None) -> list[str]:
    """One line per tier of the grid: how many of its points have no finished run in `store`, and which (`runs`: the
    store's `run_table`, when already read: `workbench compare` asks for each of its grids)."""
    from workbench.train.presets import PRESETS
    from workbench.train.sweep import grid_points, load_grid

    grid = load_grid(grid_path)
    runs = run_table(store) if runs is None else runs
    have = set(zip(runs.preset, runs.setting, runs.variant, runs.task, runs.seed, runs.data_seed))
    tiers = sorted({grid.get("tier", 1)} | {v.get("tier", grid.get("tier", 1)) for v in grid.get("variants", [])})
    out = []
    for tier in tiers:
        points = grid_points(grid, [tier])
        missing = []
        for p in points:
            fidelity = p.get("fidelity") or "pelab"
            arch = p["arch"] or PRESETS[p["preset"]]["model"]["arch"]  # None: the preset's
            setting = fidelity if fidelity in ("authors", "authors-mla") else arch
            data_seed = dict(p["sets"]).get("task.seed", DEFAULT_DATA_SEED)
            if (p["preset"], setting, p["tag"] or p["scheme"], p["task"], p["seed"], data_seed) not in have:
                missing.append(f"{p['tag'] or p['scheme']} ({SETTINGS.get(setting, setting)}, "
                               f"{task_label(p['task'])}, seed {p['seed']}"
                               + (f", data seed {data_seed}" if data_seed != DEFAULT_DATA_SEED else "")
                               + (f", `{p['preset']}`" if p["preset"] != BASE else "") + ")")
        if missing:
            shown = "; ".join(missing[:12]) + (f"; and {len(missing) - 12} more" if len(missing) > 12 else "")
            name = grid.get("name", "grid")
            out.append(f"{name} tier {tier}: {len(missing)} of {len(points)} runs: {shown}")
    return out


README_START, README_END = "<!-- findings:start -->", "<!-- findings:end -->"


def readme_block(store, figure: str | None = None, results: str = "results/repro",
                 judged: BaseClaims | None = None, study_figure: str | None = None,
                 paper_root: str | Path | None = None) -> str:
    """The README's findings: the scale disclaimer, Table 1 side by side and its cells at the paper's own scale
    (the GPU runs in `paper_root`, default `paper/` beside the store), the verdict counts, the seed study's
    readouts so far (interim until all its registered runs are shipped), linking COMPARISON.md (generated);
    `figure` / `study_figure`: the Table 1 and study-map images to show (paths relative to the README);
    `judged`: the claims COMPARISON.md was written from (`base_claims`), judged again when not given."""
    from workbench.report.paper_scale import paper_scale_lines
    from workbench.store import paper_root as beside
    from workbench.train.presets import LADDER, scale_disclaimer

    judged = base_claims(store, run_table(store), LADDER) if judged is None else judged
    runs_all, base, runs, cl = judged.runs_all, judged.base, judged.runs, judged.claims
    lines = [README_START,
             f"*Generated by `workbench compare {results} --readme README.md` from {len(runs_all)} shipped runs "
             f"({len(runs)} at `{base}`); details, every claim with its evidence, the scale ladder and provenance: "
             f"[{results}/COMPARISON.md]({results}/COMPARISON.md).*", "", scale_disclaimer(base), ""]
    qa = answers(cl)
    t1 = table1(runs)
    at_scale = paper_scale_lines(t1, beside(store.root) if paper_root is None else paper_root)
    if figure:  # the figure marks the paper-scale means on their bars where there are any (figures.findings.table1)
        alt = "PE-Lab's on CPU and at the paper's own scale on a GPU" if at_scale else "PE-Lab's"
        lines += [f"![Table 1: the paper's test accuracy and {alt}]({figure})", ""]
    lines += [_table1_section(t1), f"Runs: {status_legend(StatusRules())}. A verdict counts only the runs its claim's "
              "rule can read (*counted*: settled, not diverged, and learned where the claim is about what a model "
              "learned); the others are shown, not counted.", ""]
    lines += at_scale
    lines += ["The questions, answered so far (evidence in COMPARISON.md):", ""]
    lines += [f"- {q} " + "; ".join(f"{r.setting}: **{r.answer}**" for r in tuples(g))
              for q, g in qa.groupby("question", sort=False)]
    lines += [f"- {q} (scale ladder) " + "; ".join(f"at `{r.rung}`: **{r.answer}**" for r in tuples(g))
              for q, g in judged.answers.groupby("question", sort=False)]
    lines += study_lines(judged.study, judged.tier2, study_figure, judged.tiers)
    lines += partial_rope_lines(partial_rope_pairs(store, runs))
    lines += one_setting_lines(one_setting(store, runs))
    lines += ["", f"The claims (docs/paper.md) at `{base}`: {verdict_summary(cl)}. {_rules_when(runs)}", "",
              README_END]
    return "\n".join(lines)


def one_setting_lines(d: pd.DataFrame, min_points: float = 1.0) -> list[str]:
    """The README's summary of COMPARISON.md's one-setting table: the fields whose change moved the test accuracy
    by >= `min_points`, largest first, and how many moved it less."""
    if d.empty:
        return []
    moved = d[(100 * d["delta"]).abs() >= min_points].sort_values("delta", key=lambda x: -x.abs())
    unit = f"{min_points:g} point" + ("" if min_points == 1 else "s")
    lines = ["", "One setting at a time (the authors' settings with one field set back to PE-Lab's value; "
                 f"changes of >= {unit} in test accuracy):", ""]
    lines += [f"- {SETTINGS.get(r.setting, r.setting)}, {task_label(r.task)}, {r.base} -> {r.variant} "
              f"({r.change}): {pct(r.base_acc)} -> {pct(r.acc)} % ({100 * r.delta:+.2f} points, "
              f"{r.n_seeds} seed{'s' if r.n_seeds > 1 else ''}; {one_setting_effect(r)})" for r in tuples(moved)]
    rest = len(d) - len(moved)
    if rest:
        lines.append(f"- {rest} other change{'s' if rest > 1 else ''} moved it by less than {unit}")
    return lines


def partial_rope_lines(d: pd.DataFrame) -> list[str]:
    """The README's summary of COMPARISON.md's partial-RoPE table: one line per variant and task."""
    if d.empty:
        return []
    lines = ["", "Partial RoPE (RoPE on the first k heads of every layer or of one layer, NoPE elsewhere; `paper` "
                 "arch): test accuracy beside full RoPE's, and the single-head deposits that sit on a RoPE head:", ""]
    lines += [f"- {r.variant} ({task_label(r.task)}, k = {r.rope_heads}, RoPE layers {r.rope_layers}): "
              f"{pct(r.acc)} % vs {pct(r.full_acc)} %; deposits on a RoPE head {r.deposits_on_rope_heads}"
              + (f" (not counted: {r.uncounted})" if r.uncounted else "")
              for r in tuples(d)]
    return lines


def replace_block(text: str, block: str) -> str:
    """`text` with the part between the findings markers replaced by `block` (ValueError without markers)."""
    i, j = text.find(README_START), text.find(README_END)
    if i < 0 or j < i:
        raise ValueError(f"the README has no {README_START} ... {README_END} block to fill")
    return text[:i] + block + text[j + len(README_END):]


def write_comparison(store, path: str | Path, **kw) -> Path:
    """COMPARISON.md (`comparison_markdown`, same keywords), written atomically."""
    path = Path(path)
    atomic_write_text(path, comparison_markdown(store, **kw))
    return path
