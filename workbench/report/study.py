"""COMPARISON.md's and the README's registered parts: every registered rule with the commit that registered it, the
seed study (`[study]`), its tier 2 (an ordering, pair by pair) and its share tiers (`[study.tierN]`, one readout a
scheme), each said after what differs from the paper's setup, never pooled with the runs trained before it.

    text = study_section(study_frame, runs, tier2_readouts)    # "## The seed study" of COMPARISON.md
    lines = study_lines(study_frame, tier2_readouts)           # the README's paragraph
    text = registration_section(claims, runs, registration_commits())

Numbers come from `workbench.analysis.claims` (registration, study); this module only writes them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from workbench.analysis.claims import (by_construction_note, planned_runs, registration_changes, registration_table,
                                       share_tiers, study_readouts, study_title, tier2_pairs, tier2_title,
                                       tier_readouts, tier_runs)
from workbench.analysis.claims.registry import REGISTRY, load_registry
from workbench.analysis.claims.study import NEVER_DECIDING
from workbench.analysis.common import scheme_label, task_label, tuples

from .markdown import links, md_table, pct


def registration_commits(path: str | Path = REGISTRY) -> list[tuple[str, str]]:
    """[(short commit, date)] of the commits that changed the registration file, oldest first (`git log --follow`);
    [] where git or the history is not available (a shipped copy): the registry's own dates are said instead.
    The short commit is the full hash's first 7 characters, not git's `%h`, whose length grows with the number of
    objects in the clone (a CI clone wrote 8), so that COMPARISON.md reads the same in every clone. A shallow clone
    gives [] too: its oldest commit is where the clone was cut, not the one that registered the rules."""
    import subprocess

    path = Path(path)
    try:  # newest first, reversed below: `--follow` stops at a rename under `--reverse`
        shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=path.parent,
                                 capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        if shallow == "true":
            return []
        out = subprocess.run(["git", "log", "--follow", "--format=%H %cs", "--", path.name], cwd=path.parent,
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [(h[:7], day) for h, day in (line.split(" ", 1) for line in out.splitlines() if " " in line)][::-1]


def rule_commit(claim: dict, commits: list[tuple[str, str]], registered: str) -> str:
    """The commit that registered `claim`'s current rule: version 1, the first commit of the registration file;
    a later version, the first commit on or after its `changed` date; without git, the registry's date."""
    when = str(claim.get("changed") or registered)
    if not commits:
        return f"registered {when} (no git history here)"
    if int(claim.get("version", 1)) <= 1:
        return f"`{commits[0][0]}` ({commits[0][1]})"
    later = [c for c in commits if c[1] >= when]
    c = later[0] if later else commits[-1]
    return f"`{c[0]}` ({c[1]})"


def registration_section(cl: pd.DataFrame, runs_all: pd.DataFrame, commits: list[tuple[str, str]]) -> str:
    """Every registered rule with the commit that registered it, its version, and whether it changed after the
    runs it judges were trained (`claims.registration_table`), then what changed (`claims.registration_changes`)."""
    reg = load_registry()
    rows = []
    for r in tuples(registration_table(cl, runs_all)):
        what = f" ({r.what})" if r.what else ""
        flag = (f"**changed {r.changed}{what}, after its runs were trained (latest {r.latest_run})**" if r.after_runs
                else f"changed {r.changed}{what}" if r.changed else "unchanged")
        rows.append([f"`{r.rule}`", r.section, r.decision, str(r.version),
                     rule_commit(reg.claim(r.rule), commits, reg.registered), flag, str(r.runs_judged)])
    notes = [f"- {line}" for line in registration_changes()]
    caveats = [f"- `{r.rule}`: {r.caveat}." for r in tuples(registration_table(cl, runs_all)) if r.caveat]
    table = md_table(["rule", "paper section", "decision", "version", "registered in", "since", "runs judged"], rows)
    quoted = [f"- `{r.rule}` ({r.section}): \"{reg.claim(r.rule)['quote']}\""
              for r in tuples(registration_table(cl, runs_all)) if reg.claim(r.rule).get("quote")]
    table += ("\nThe paper's own sentence each rule reads (verbatim, checked against the paper's text by "
              "tests/test_registration.py):\n\n" + "\n".join(quoted) + "\n") if quoted else ""
    changed = "\nWhat changed since the registration:\n\n" + "\n".join(notes) + "\n" if notes else ""
    caveated = ("\nCaveats registered beside a rule (`caveat`): where its quoted sentence does not itself state the "
                "direction it tests (a verdict on these is a verdict on Table 1's numbers), or where the preset "
                "carries a confound the rule cannot remove:\n\n" + "\n".join(caveats) + "\n" if caveats else "")
    return table + "\n" + changed + caveated


def study_section(st: pd.DataFrame, runs_all: pd.DataFrame, tier2: pd.DataFrame,
                   tiers: dict | None = None) -> str:
    """The seed study: per scheme the counted runs and the registered readouts (`study_readouts`: the study's runs,
    and the runs trained before the registration beside them, never pooled), then every run of it; then tier 2
    (`tier2_section`, its readouts `tier2`) and each share tier (`tier_section`, its readouts `tiers[N]`,
    computed from `runs_all` when not given)."""
    study, reads = load_registry().study, study_readouts(st)
    lead = (not_the_papers(study["preset"]) + study_differs()
            + " The registered seed study (`[study]` of the registry, "
            f"`{study['grid']}`): the `{study['arch']}` arch's "
            f"{', '.join(scheme_label(s) for s in study['schemes'])} on {task_label(study['task'])} at "
            f"`{study['preset']}`, training seeds {study['train_seeds'][0]}-{study['train_seeds'][-1]} x data seeds "
            f"{', '.join(str(d) for d in study['data_seeds'])}, judged by the registered rules alone. The runs "
            "of the scale ladder at this preset (seeds 42-44, data seed 42, \"ladder seeds\": all trained before the "
            "registration) are shown beside it, never pooled.")
    n = int((st.group == "study").sum()) if len(st) else 0
    want = planned_runs(all_schemes=True)
    out = [lead, "", f"Study runs shipped: {n} of {want}" + (" (none has finished yet: `make study` continues it; "
                                                                "nothing below decides the headline questions)"
                                                                if n == 0 else "") + ".", ""]
    if len(reads):
        out += [md_table(["group", "scheme", "runs", "counted", "rests on", "readout", "at 0.05", "at 0.10",
                           "decision (0.05)", "decision (0.10)"],
                          [[r.group, scheme_label(r.scheme), str(r.runs), str(r.counted), r.rests_on, r.readout,
                            r.at_005, r.at_010, r.decision, r.decision_010] for r in tuples(reads)]), ""]
    if len(st):
        def cell(r, tag):
            layer = getattr(r, f"layer_{tag}")
            return "none" if pd.isna(layer) else (f"L{int(layer)}.H{int(getattr(r, f'head_{tag}'))} "
                                                   f"{getattr(r, f'drop_{tag}'):.3f}")
        out += [md_table(["group", "scheme", "training seed", "data seed", "run", "counted",
                           "largest deposit (0.05)", "largest deposit (0.10)", "largest drop of any head", "run id"],
                          [[r.group, scheme_label(r.scheme), str(r.train_seed), str(r.data_seed), r.status,
                            "yes" if r.counted else "no", cell(r, "005"), cell(r, "010"),
                            "–" if pd.isna(r.largest_drop) else f"{r.largest_drop:.3f}", links([r.run_id], 1)]
                           for r in tuples(st)]), ""]
    tiers = {t: tier_readouts(runs_all, t) for t in share_tiers()} if tiers is None else tiers
    return "\n".join(out + [tier2_section(runs_all, tier2)]
                     + [tier_section(runs_all, t, reads) for t, reads in tiers.items()])


def not_the_papers(preset: str) -> str:
    """What differs from the paper's setup at a study's `preset`, said before its results: the preset's own line,
    pointing at the box that opens the document for the rest."""
    from workbench.train.presets import PRESETS

    return (f"**Not the paper's setup:** `{preset}` is {PRESETS[preset]['doc'].removeprefix('scale ladder: ')} "
            "(how `repro` differs from the paper: the box at the top, and *What differs from the paper's setup*). ")


def tier2_section(runs_all: pd.DataFrame, reads: pd.DataFrame) -> str:
    """Tier 2 of the seed study (`[study.tier2]`): the ordering's readout per group (`reads`, `tier2_readouts`),
    then every pair of `runs_all` with both sides' test accuracy and status (`tier2_pairs`)."""
    t2 = load_registry().study["tier2"]
    win, lose = (scheme_label(s) for s in t2["schemes"])
    n = int(((pairs := tier2_pairs(runs_all)).group == "study").sum())
    want = planned_runs(tier=2)
    out = [f"### Tier 2: {tier2_title()}", "",
           not_the_papers(t2["preset"])
           + f"Registered in `[study.tier2]`: training seeds {t2['train_seeds'][0]}-{t2['train_seeds'][-1]} x data "
           f"seeds {', '.join(str(d) for d in t2['data_seeds'])}, judged by `{t2['claims'][0]}`'s own rule (the "
           "ordering decision: its status checks first, then the Student-t 95 % interval of the mean paired "
           f"difference). Study pairs shipped: {n} of {want} (`make study TIER=2`). \"ladder seeds\": the scale "
           "ladder's pairs at this preset (seeds 42-44, data seed 42), all trained before the registration (seed "
           "43's run folders date from 2026-11-27: shipped with metrics only, they were re-created then, bit for bit, "
           "to add their tables), read beside, never pooled.", ""]
    if len(reads):
        out += [md_table(["group", "pairs", "rests on", "readout", "evidence", "decision"],
                          [[r.group, str(r.pairs), r.rests_on, r.readout, r.evidence, r.decision]
                           for r in tuples(reads)]), ""]
    if len(pairs):
        out += [md_table(["group", "training seed", "data seed", win, lose, f"{win} - {lose}", "runs"],
                          [[r.group, str(r.train_seed), str(r.data_seed), f"{100 * r.win_acc:.2f} ({r.win_status})",
                            f"{100 * r.lose_acc:.2f} ({r.lose_status})", f"{100 * r.diff:+.2f} points",
                            links([r.win_run, r.lose_run], 2)] for r in tuples(pairs)]), ""]
    return "\n".join(out)


def tier_section(runs_all: pd.DataFrame, tier: int, reads: pd.DataFrame) -> str:
    """A share tier of the seed study (`[study.tierN]`, `share_tiers`: 3 and 4): what differs first, the
    registration, the readout per scheme and group (`reads`, `tier_readouts`), then every run of the tier with its
    status, and beside it the same seeds' runs of an earlier share tier (`tier_runs`), never pooled."""
    t, table, note = load_registry().study[f"tier{tier}"], tier_runs(runs_all, tier), by_construction_note(tier)
    n, want = int((table.group == "study").sum()), planned_runs(tier=tier, all_schemes=True)
    contrast = load_registry().claim(t["claims"][0])["contrast"]
    tests = [scheme_label(s) for s in t["schemes"] if s not in t.get("by_construction", [])]
    old = table[table.group != "study"]
    before = sorted(set(zip(old.train_seed, old.data_seed)))
    out = [f"### Tier {tier}: {study_title(tier)}", "",
           not_the_papers(t["preset"]) + (note + " " if note else "")
           + f"The test: {' and '.join(tests)} (registered exploratory: no direction predicted). The optimiser was "
           f"tuned on RoPE. Registered in `[study.tier{tier}]` on {t['registered']}, before any of its runs "
           f"(docs/preregistration.md, \"Tier {tier}\", with any amendment): training seeds "
           f"{t['train_seeds'][0]}-{t['train_seeds'][-1]} x data seeds "
           f"{', '.join(str(d) for d in t['data_seeds'])}, judged by `{t['claims'][0]}`'s own rule, version "
           f"{t['rule_version']} (a settled run agrees when it clearly did not learn, the Wilson upper bound of its "
           "test accuracy below the bar, disagrees when it learned, is not counted in between; the share decision, "
           "one a scheme), its contrast "
           f"{scheme_label(contrast)} read by the same rule on tier {t['contrast_tier']}'s runs of the same group. "
           f"Study runs shipped: {n} of {want} (`make study TIER={tier}`)."
           + (" \"ladder seeds\": the scale ladder's runs at this preset (" + ", ".join(
               f"seed {s}, data seed {d}" for s, d in before) + "), trained before the registration, read "
              "beside, never pooled." if before else ""), ""]
    if len(reads):
        out += [md_table(["group", "scheme", "role", "runs", "counted", "rests on", "evidence", "decision"],
                          [[r.group, scheme_label(r.scheme), r.role, str(r.runs), str(r.counted), r.rests_on,
                            r.evidence, r.decision] for r in tuples(reads)]), ""]
    if len(table):
        beside = bool(table.earlier_run.notna().any())

        def cells(r) -> list[str]:
            return [] if not beside else [f"tier {int(r.earlier_tier)} (`{r.earlier_preset}`): "
                                          f"{pct(r.earlier_test_acc)} ({r.earlier_status}) "
                                          + links([r.earlier_run], 1) if r.earlier_run else "–"]
        out += [md_table(["group", "scheme", "training seed", "data seed", "test acc, epoch 1 -> last",
                           "train acc", "run", "run id"] + ["same seeds in an earlier tier (test acc, run)"] * beside,
                          [[r.group, scheme_label(r.scheme), str(r.train_seed), str(r.data_seed),
                            f"{pct(r.test_acc_epoch1)} -> {pct(r.test_acc)}",
                            pct(r.train_acc) + ("" if r.train_acc_measured else " (running mean)"), r.status,
                            links([r.run_id], 1)] + cells(r) for r in tuples(table)]), ""]
    return "\n".join(out)


def preset_difference(preset: str = "repro-long", base: str = "repro", task: str = "trigger-distance") -> str:
    """How `preset` differs from `base` on `task` (their resolved configs, field by field): "`repro` with
    train.epochs 12 (not 3)", the box that opens a report being `base`'s."""
    from workbench.analysis.claims.one_field import config_changes
    from workbench.train.presets import base_config

    diff = config_changes(base_config(base, "rope", task), base_config(preset, "rope", task))
    return (f"`{base}` with " + ", ".join(f"{k} {new} (not {old})" for k, (old, new) in diff.items()) if diff
            else f"the same as `{base}`")


def study_differs() -> str:
    """What differs from the paper's own models for the study's schemes, said before its readouts: the arch and its
    dropout (the study preset's resolved config against the `paper` preset's), PE-Lab's RoPE and MLA against the
    authors' (docs/fidelity.md rows 13, 31, 33), and the head ablation against the paper's Figure 7 (row 36)."""
    from workbench.train.presets import base_config

    study = load_registry().study
    ours, theirs = (base_config(p, "rope", study["task"])["model"]["dropout"] for p in (study["preset"], "paper"))
    return (f"The study's models are PE-Lab's `{study['arch']}` arch with dropout {ours:g} (the paper's {theirs:g}: "
            "\"all our experiments used dropout, so the deposit pattern is not a phenomenon that can be improved by "
            "ordinary dropout\", Remark C.1). Its RoPE is RoPE alone: the authors' RoPE behind Table 1 and Figure 4 "
            "also added a sinusoid at the input (docs/fidelity.md, row 13). Its MLA has a rotary query per head and a "
            "true rotation (the authors' shares one rotary query "
            "across heads and reads sin and cos at mismatched frequencies, rows 31 and 33), and the study zeroes each "
            "head's output, where the paper's Figure 7 zeroed 16-wide column blocks of the latent projections, empty "
            "for heads 8-15 (row 36).")


def study_lines(st: pd.DataFrame, tier2: pd.DataFrame, figure: str | None = None,
                tiers: dict | None = None) -> list[str]:
    """The README's seed-study paragraph: how many of its registered runs are shipped, then each deciding readout
    of the study group (`study_readouts`) with its decision (the second reading, layer <= 1, without: it never
    decides), the study map (`figure`) when given, tier 2's readout per group (`tier2`, `tier2_readouts`) and each
    share tier's per scheme and group (`tiers[N]`, `tier_readouts`), when given."""
    want = planned_runs(all_schemes=True)
    n_study = int((st.group == "study").sum()) if len(st) else 0
    study = load_registry().study
    lines = ["", f"The registered seed study (docs/preregistration.md; {study_title()}: "
                 f"{preset_difference(study['preset'], task=study['task'])}; {want} runs): {n_study} of {want} shipped"
                 + (" so far" if n_study < want else "") + ". " + study_differs() + " Readouts under the registered "
                 "rules (COMPARISON.md, \"The seed study\"):", ""]
    reads = study_readouts(st) if len(st) else pd.DataFrame(columns=["group", "decision"])
    reads = reads[(reads.group == "study") & (reads.decision != "")]
    lines += [f"- {scheme_label(r.scheme)}, {r.readout}, at 0.05: {r.at_005}"
              + ("" if r.decision == NEVER_DECIDING else f": **{r.decision}**"
                 + ("" if r.decision_010 == r.decision else f"; at 0.10: **{r.decision_010}**"))
              for r in tuples(reads)] or ["- no study run has finished yet"]
    if figure:
        lines += ["", f"![The seed study: where each run's largest deposit (RoPE) and largest drop (MLA) fall]"
                      f"({figure})"]
    t2 = load_registry().study["tier2"]
    lines += ["", f"Tier 2 ({tier2_title()}, {planned_runs(tier=2, all_schemes=True)} runs in "
                  f"{planned_runs(tier=2)} pairs; `make study TIER=2`; not the paper's setup: "
                  f"{preset_difference(t2['preset'], task=t2['task'])}):", ""]
    lines += [f"- {r.group}: {r.pairs} pair{'s' if r.pairs != 1 else ''}, {r.evidence}: **{r.decision}**"
              for r in tuples(tier2)] or ["- no pair has finished yet"]
    for tier, reads in (tiers or {}).items():
        t, note = study[f"tier{tier}"], by_construction_note(tier).rstrip(".")
        lines += ["", f"Tier {tier} ({study_title(tier)}, {planned_runs(tier=tier, all_schemes=True)} runs, registered "
                      f"{t['registered']}; `make study TIER={tier}`; not the paper's setup: "
                      f"{preset_difference(t['preset'], task=t['task'])}" + (f"; {note}" if note else "") + "):", ""]
        lines += [f"- {r.group}, {scheme_label(r.scheme)}"
                  + (f" ({r.role})" if r.role != "test" else "")
                  + (f": {r.counted} of {r.runs} runs counted" if r.runs else "") + f": **{r.decision}**"
                  for r in tuples(reads)] or ["- no run has finished yet"]
    return lines
