"""`workbench report`: one self-contained HTML file + summary.json, checked as a user would (CLI, then the
file opened offline in headless chromium)."""
from __future__ import annotations

from html import escape
import json
import re

import pandas as pd
import pytest

import browser as B


@pytest.fixture(scope="module")
def smoke():
    return B.smoke_store()


@pytest.fixture(scope="module")
def report(smoke, tmp_path_factory):
    """`workbench report --runs task=trigger-distance` over the smoke store."""
    from typer.testing import CliRunner

    from workbench.cli import app as cli

    out = tmp_path_factory.mktemp("report") / "report.html"
    r = CliRunner().invoke(cli, ["report", "--store", str(smoke.root), "--runs", "task=trigger-distance",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads((out.parent / "summary.json").read_text())
    return out, out.read_text(encoding="utf-8"), summary


def test_parse_query():
    from workbench.report import parse_query

    assert parse_query("all") == {} and parse_query("") == {}
    assert parse_query("scheme=rope|nope,task=trigger-distance") == {"scheme": ["rope", "nope"],
                                                                      "task": ["trigger-distance"]}
    assert parse_query("scheme=rope,scheme=mla") == {"scheme": ["rope", "mla"]}
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        parse_query("colour=red")
    with pytest.raises(ValueError, match="not key=value"):
        parse_query("rope")


def test_summary_matches_the_store(report, smoke):
    from workbench.store import RunStore

    store = RunStore(smoke.root)
    _, html_text, summary = report
    assert "<th>shows</th>" in html_text.split('<section id="runs">')[1].split("</section>")[0]  # the runs table's column
    ids = {r["id"] for r in summary["runs"]}
    expected = set(store.query(task="trigger-distance")["id"])
    assert ids == expected and smoke.count not in ids  # the Task 2 run is not selected
    by_id = {r["id"]: r for r in summary["runs"]}
    rope = by_id[smoke.rope]
    run = store.get(smoke.rope)
    assert rope["final"]["test_acc"] == pytest.approx(run.final["test_acc"])
    assert rope["config"]["model"]["scheme"] == "rope" and rope["status"] == "finished"
    from workbench.analysis.claims import status_of_run

    reading = status_of_run(run)
    assert rope["run_status"] == reading["status"] and rope["run_status"]  # the registered reading
    assert rope["run_why"] == reading["why"]
    assert set(rope["tables"]["present"]) == set(run.tables())
    for name, path in rope["tables"]["files"].items():
        pd.testing.assert_frame_equal(pd.read_parquet(path), run.load_table(name))
    # what made each table, as the store records it (code version, when, numerics with the thread count)
    assert rope["tables"]["provenance"] and set(rope["tables"]["provenance"]) <= set(run.tables())
    for name, made in rope["tables"]["provenance"].items():
        assert made == run.provenance_of(name) and made["code_version"] and made["numerics"]["threads"] >= 1
    # deposit statistics, regenerated from the stored table, give the numbers in summary.json
    if "ablation" in run.tables():
        from workbench.analysis import deposit

        stats = deposit.compute(run.load_table("ablation"), metric="accuracy")
        assert [d["layer"] for d in rope["deposits"]] == list(stats["layer"])
        assert [d["concentration"] for d in rope["deposits"]] == pytest.approx(list(stats["concentration"]),
                                                                                 nan_ok=True)
        assert rope["deposit_sentence"] == deposit.deposit_sentence(stats)
        # the HTML reads the sentence by the run's status, as the dashboard and `analyze` do
        from workbench.analysis.claims import as_read

        read = as_read(rope["deposit_sentence"], reading)
        assert escape(read) in html_text
        assert (read != rope["deposit_sentence"]) == (reading["status"] not in ("learned", "ceiling"))
    created = by_id[smoke.created]
    assert created["status"] == "created" and "ablation" in created["tables"]["missing"]
    assert created["run_status"] is None  # no epoch: nothing to read
    assert by_id[smoke.failed]["status"] == "failed"
    assert "CUDA out of memory" in by_id[smoke.failed]["error"]


def test_the_experiment_tables_read_each_runs_deposit_by_its_status(report):
    """The section-5 experiment tables (partial RoPE, MLA vs RoPE vs NoPE, ...) give each run's status (`shows`, as
    summary.json's run_status) and read its deposit sentence by it, as the Partial RoPE page does."""
    from workbench.analysis.claims import as_read

    _, html_text, summary = report
    section = html_text.split('<section id="experiments">')[1].split("</section>")[0]
    status = {r["id"]: r["run_status"] for r in summary["runs"]}
    assert summary["experiments"], "the smoke store's Task 1 runs make at least one experiment table"
    assert "<th>shows</th>" in section
    read = [as_read(row["deposit"], status[row["run_id"]], brief=True) for rows in summary["experiments"].values()
            for row in rows if "deposit" in row]
    assert read and all(escape(r) in section for r in read)
    assert any(r.startswith("cannot tell, the run did not learn") for r in read)  # smoke runs of 2 epochs


def test_the_report_names_its_store_by_folder_and_leaks_no_path_of_this_machine(report, smoke):
    """A report is a file to share: its header names the store's folder; the full paths stay in summary.json."""
    from pathlib import Path

    out, html_text, summary = report
    root = Path(smoke.root).resolve()
    assert summary["store"] == str(root)  # scripts on this machine still get the full path
    meta = html_text.split('<div class="meta">')[1].split("</div>")[0]
    shipped = f" + shipped {escape(Path(summary['shipped']).name)}" if summary["shipped"] else ""
    assert f"store {escape(root.name)}{shipped} ·" in meta
    for path in {str(root), str(root.parent), str(out.parent.resolve())}:
        assert escape(path) not in html_text, f"{path} is printed in the report"


def test_each_runs_ablation_and_heads_say_what_its_status_lets_them_show(report):
    """Under a run's heading in the ablation atlas and the Heads section: the dashboard's warning for a run that did
    not learn (`claims.reading_note`, with the rule's why), a note for one still learning, nothing for one that
    learned and settled."""
    from workbench.analysis.claims import reading_note

    _, html_text, summary = report
    seen = set()
    for r in summary["runs"]:
        note = reading_note({"status": r["run_status"], "why": r["run_why"]})
        for part in ("abl", "heads"):
            if f'<h3 id="{part}-{r["id"]}">' not in html_text:
                continue
            block = html_text.split(f'<h3 id="{part}-{r["id"]}">')[1].split("<h3")[0]
            if "no ablation table yet" in block or "no head summary yet" in block:
                continue
            if note is None:
                assert 'class="reading-' not in block
            else:
                assert f'<p class="reading-{note[0]}">' in block and escape(f"{r['id']} {note[1]}") in block
                seen.add(note[0])
    assert "warn" in seen, "the smoke runs (2 epochs) did not learn"


def test_html_is_self_contained_with_one_plotly_and_every_figure(report):
    from plotly.offline import get_plotlyjs

    import base64
    import gzip

    from workbench.report.build import PLOTLY_PAYLOAD_ID

    _, html, summary = report
    payloads = re.findall(rf'<script type="application/octet-stream" id="{PLOTLY_PAYLOAD_ID}">([^<]*)</script>', html)
    assert len(payloads) == 1, "plotly.js must be embedded exactly once"
    assert gzip.decompress(base64.b64decode(payloads[0])).decode() == get_plotlyjs(), "and be plotly.js itself"
    assert get_plotlyjs()[:2000] not in html, "not a second, uncompressed copy"
    rest = html.replace(payloads[0], "")
    assert "<script src" not in rest and not re.search(r"""(src|href)\s*=\s*["']https?://""", rest), \
        "no external resources (offline)"
    figs = summary["figures"]
    assert figs, "the report has figures"
    for f in figs:
        assert html.count(f'id="{f["id"]}"') == 1
        assert f["n_traces"] > 0
    sections = {f["section"] for f in figs}
    assert {"findings", "settings", "convergence", "ablation"} <= sections
    assert [f["figure"] for f in figs if f["section"] == "findings"][:1] == ["verdict_matrix"]
    assert summary["per_run_diagnostics"] and summary["findings"]
    assert any(s.startswith("diagnostics/") for s in sections)
    assert "no ablation table yet" in html  # the never-trained run is listed as missing, not skipped
    assert "<th>test_acc (%)</th>" in html and "<th>test_acc</th>" not in html, "the runs table reads in percent"
    # the Heads section: the RoPE run's head summary and the eight detail figures, a hint for the others, and
    # where the heads take in the difference over the runs with a qkv table (here the RoPE run alone)
    heads = {s for s in sections if s.startswith("heads/")}
    assert heads == {"heads/head_summary", "heads/patching", "heads/attribution", "heads/edges", "heads/qkv",
                     "heads/probes", "heads/trigger_attention", "heads/dla", "heads/self_repair",
                     "heads/qkv_shares", "heads/self_repair_shares"}
    shares = [f for f in figs if f["figure"] == "qkv_shares"]
    assert len(shares) == 1 and shares[0]["runs"] == list(summary["heads"]) and shares[0]["n_traces"] == 3
    repair = [f for f in figs if f["figure"] == "self_repair_shares"]
    assert len(repair) == 1 and repair[0]["runs"] == list(summary["heads"]) and repair[0]["n_traces"] == 4
    assert "no head summary yet" in html and set(summary["heads"]) == {
        r["id"] for r in summary["runs"] if "head_summary" in r.get("tables", {}).get("present", [])}
    # a flagged head's row shows where its effect enters (qkv's AtP* through queries, keys, values)
    assert ("<th>via_key</th>" in html) == any(summary["heads"].values())
    assert ("<th>repaired</th>" in html) == any(summary["heads"].values())  # and how much of it self-repair makes up


def test_a_large_selection_gets_the_findings_and_the_view_per_setting_and_says_how_to_narrow_it(smoke, tmp_path,
                                                                                                 monkeypatch):
    """Above MAX_DETAIL_RUNS runs the report has no per-run figures: the findings, one figure per setting and
    analysis (seeds together), the runs table, and a note naming the limit and how to narrow the selection. GPU runs
    in `paper/` beside the store (here one smoke run copied there) add the paper-scale line under Table 1."""
    import shutil

    from workbench.report import build_report, overview

    monkeypatch.setattr(overview, "MAX_DETAIL_RUNS", 2)
    shutil.copytree(smoke.root / smoke.rope, tmp_path / "paper" / smoke.rope,  # a finished RoPE Task 1 run
                    ignore=shutil.ignore_patterns("*.safetensors"))
    from workbench.analysis import deposit
    from workbench.store import RunStore

    deposit.run(RunStore(tmp_path / "paper").get(smoke.rope), compute_missing=False)  # from its ablation table
    import workbench.store

    monkeypatch.setattr(workbench.store, "paper_root", lambda root: tmp_path / "paper")
    lines = []
    s = build_report(smoke.root, "all", tmp_path / "r.html", log=lines.append)
    html = (tmp_path / "r.html").read_text()
    assert not s["per_run_diagnostics"] and len(s["runs"]) > 2
    assert {f["section"] for f in s["figures"]} == {"findings", "settings"}
    assert 'id="abl-' not in html and "written for at most 2 runs" in html and "--runs preset=" in html
    settings = {(r["preset"], r["config"]["model"]["arch"]) for r in s["runs"] if r["status"] == "finished"}
    curves = [f for f in s["figures"] if f["section"] == "settings" and f["figure"] == "convergence"]
    assert len(curves) == len(settings)  # one learning-curve figure per setting, its seeds together
    assert any(l.startswith("findings:") for l in lines) and any(l.startswith("per setting") for l in lines)
    assert "At the paper&#x27;s own scale (1 GPU run in results/paper" in html and "RoPE Task 1 (" in html
    paper_maps = [f for f in s["figures"] if f["figure"] == "deposit_map" and f["runs"] == [smoke.rope]]
    assert len(paper_maps) == 1 and "largest single-head deposit:" in html  # where the GPU run's deposit falls


def test_the_report_says_first_how_its_preset_differs_from_the_papers_setup(report):
    """Before any result, the box of the selection's preset (`presets.disclaimer`): here the smoke store's, with
    its 2 layers x 4 heads set against the paper's 6 x 16, open; summary.json carries it as markdown. (The smoke
    store is shared by the test process: runs another test adds at another preset get a folded box each.)"""
    from workbench.analysis.claims import base_preset
    from workbench.train.presets import scale_disclaimer

    _, html_text, summary = report
    body = html_text[html_text.index("<main>"):]
    first = body.index('<section id="read-first">')
    assert first < body.index('<section id="findings">') and first < body.index('<div class="fig">')
    box = body[first:body.index("</section>", first)]
    presets = pd.DataFrame([r for r in summary["runs"] if r["status"] == "finished"])
    base = base_preset(presets)
    assert base == "smoke" and list(summary["disclaimers"])[0] == base
    assert set(summary["disclaimers"]) == set(r["preset"] for r in summary["runs"])
    assert summary["disclaimers"]["smoke"] == scale_disclaimer("smoke")
    opened = box[:box.index("</div>")]
    assert opened.startswith('<section id="read-first">\n<div class="disclaimer" data-preset="smoke">')
    assert "<strong>Read this first: results at the <code>smoke</code> preset, not the paper's setup.</strong>" in opened
    assert "2 layers x 4 heads (paper 6 x 16)" in opened and "<em>not reproduced at this preset</em>" in opened
    assert opened.count("<li>") == 5 and box.count("<details") == len(summary["disclaimers"]) - 1
    assert "attends bidirectionally" in opened  # the paper's "decoder" against its code, stated first


def test_a_report_of_several_presets_opens_with_the_base_ones_box_and_folds_the_others(tmp_path):
    """Shipped runs at `repro` and `repro-long`: the `repro` box open (the findings judge that preset), the
    `repro-long` one folded below it. A setting whose selected runs are all variants (the authors' script's
    rope-no-sinusoid alone) gets a note, not a failed figure."""
    from workbench.report import build_report
    from workbench.store import StoreSet

    shipped = B.REPO / "results" / "repro"
    ids = ["t1-rope-repro-s42-e451f6", "t1-rope-repro-long-s42-df23f5",  # RoPE, PE-Lab's paper arch
           "t1-rope-no-sinusoid-repro-s42-80fca9"]  # the authors' script, a variant of its rope
    if not all((shipped / i).is_dir() for i in ids):
        pytest.skip("no shipped results in this checkout")
    (tmp_path / "own").mkdir()
    store = StoreSet.open(tmp_path / "own", shipped=shipped)
    s = build_report(store, "id=" + "|".join(ids), tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert list(s["disclaimers"]) == ["repro", "repro-long"]
    box = text[text.index('<section id="read-first">'):text.index('<section id="findings">')]
    assert box.index('data-preset="repro"') < box.index('<details class="disclaimer" data-preset="repro-long"')
    assert "How the <code>repro-long</code> preset differs from the paper's setup" in box
    assert "12 epochs (paper 100)" in box and box.count("<details") == 1
    assert s["problems"] == [], s["problems"]  # no "learning curves ... NotApplicable" for the variant-only setting
    assert "No plain run of a scheme at this setting in the selection (only rope-no-sinusoid)" in text


def test_report_with_no_matching_runs_says_so(smoke, tmp_path):
    from workbench.report import build_report

    s = build_report(smoke.root, "scheme=fope", tmp_path / "r.html")
    assert s["runs"] == [] and s["figures"] == []
    assert "no runs match" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize("args, says", [
    (["--runs", "scheme=fope"], "no runs match --runs 'scheme=fope'"),
    (["--summary", "{out}"], "is the report's --out"),
    (["--out", "{out}.pdf"], "the report is HTML"),
])
def test_report_cli_refuses_before_it_writes(tmp_path, args, says):
    """A query matching nothing, --summary on the report itself or a report named .pdf: exit 2, and the report and
    summary already there are kept as they were."""
    from typer.testing import CliRunner

    from workbench.cli import app as cli
    from workbench.store import RunStore

    RunStore(tmp_path / "runs"), (tmp_path / "shipped").mkdir()
    out = tmp_path / "r.html"
    for f in (out, tmp_path / "r.summary.json", tmp_path / "r.html.pdf"):
        f.write_text("good")
    r = CliRunner().invoke(cli, ["report", "--root", str(tmp_path / "runs"), "--shipped", str(tmp_path / "shipped"),
                                 "--out", str(out)] + [a.format(out=out) for a in args], env={"COLUMNS": "250"})
    assert r.exit_code == 2 and says in r.output, r.output
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["r.html", "r.html.pdf", "r.summary.json"]
    assert all(f.read_text() == "good" for f in tmp_path.iterdir() if f.is_file())


def test_a_report_of_only_damaged_runs_is_refused_and_keeps_the_old_one(tmp_path):
    from typer.testing import CliRunner

    from workbench.cli import app as cli

    bad = tmp_path / "runs" / "t1-rope-smoke-s42-abcdef"
    bad.mkdir(parents=True)
    (bad / "config.json").write_text("{")
    (bad / "run.json").write_text("{}")
    (tmp_path / "shipped").mkdir()
    out = tmp_path / "r.html"
    out.write_text("good")
    r = CliRunner().invoke(cli, ["report", "--root", str(tmp_path / "runs"), "--shipped", str(tmp_path / "shipped"),
                                 "--out", str(out)], env={"COLUMNS": "250"})
    assert r.exit_code == 2 and "every run --runs 'all' selects is damaged" in r.output and bad.name in r.output
    assert out.read_text() == "good" and not (tmp_path / "r.summary.json").exists()


@pytest.mark.browser
def test_report_renders_in_the_browser(report):
    reason = B.browser_skip_reason()
    if reason:
        pytest.skip(reason)
    out, _, summary = report
    drv = B.driver()
    drv.get_log("browser")
    drv.get(out.as_uri())
    n = len(summary["figures"])
    B.wait_until(lambda: len([c for c in B.trace_counts(drv) if c > 0]) == n, 60,
                 what=f"{n} rendered plotly graphs")
    rendered = drv.execute_script("return document.querySelectorAll('.js-plotly-plot .main-svg').length")
    assert rendered >= n
    errors = B.console_errors(drv)
    assert not errors, errors
    unreadable = B.unreadable_text(drv, "body")  # the dashboard's figures, at the browser's 1,400 px
    assert not unreadable, "\n".join(unreadable)
    fetched = drv.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert not [u for u in fetched if u.startswith(("http:", "https:"))], f"the report fetched {fetched}"
    B.screenshot(drv, "report_smoke")  # artifacts/; docs/img/report.png: `browser.py screenshots --pages report`


def test_a_report_built_again_draws_only_the_figures_whose_tables_changed(smoke, tmp_path, monkeypatch):
    """`Doc.figure` keeps each figure's HTML by its builder, table content and arguments: the same report built
    again in one process calls no builder and writes the same page; a changed table redraws only its figures; a
    static export (the figure objects kept) and a table pandas cannot hash always draw."""
    import functools
    import shutil

    from workbench.figures.kept import Kept, key_of
    from workbench.report import build
    from workbench.store import RunStore

    shutil.copytree(smoke.root, tmp_path / "runs", ignore=shutil.ignore_patterns("index.sqlite"))
    store = RunStore(tmp_path / "runs")
    calls = []
    real = build._figures()
    counting = {name: (lambda n, f: lambda df, **kw: (calls.append(n), f(df, **kw))[1])(name, fn)
                for name, fn in real.items()}
    monkeypatch.setattr(build, "_figures", lambda: counting)
    kept = Kept(512)
    monkeypatch.setattr(build, "_figure_html", lambda: kept)

    def page(out):
        summary = build.build_report(store, f"id={smoke.rope}", tmp_path / out)
        text = (tmp_path / out).read_text(encoding="utf-8")
        return re.sub(r" · generated [^<]*", "", text), summary

    first, summary = page("a.html")
    assert len(calls) == len(kept) and 10 < len(calls) <= len(summary["figures"])  # a figure
    # drawn twice in one report (the same table and arguments) is drawn once
    calls.clear()
    again, summary2 = page("b.html")
    assert calls == [] and again == first and summary2["figures"] == summary["figures"]

    run = store.get(smoke.rope)
    qk = run.load_table("qk_means")
    drawn_from = [f["figure"] for f in summary["figures"] if f"{smoke.rope}:qk_means" in
                  [f"{r}:{t}" for r in f["runs"] for t in f["tables"]]]
    assert drawn_from, summary["figures"][:3]
    run.save_table("qk_means", qk.assign(**{c: qk[c] * 2 for c in qk.select_dtypes("float").columns}))
    changed, _ = page("c.html")
    assert sorted(calls) == sorted(drawn_from) and changed != first

    kept.size = 2  # bounded: the least recently used go first
    calls.clear()
    doc = build.Doc(keep=True)
    listed = pd.DataFrame({"layer": [0, 1], "cells": [[1], [2]]})
    small = qk.head(4)
    for d in (doc, doc, build.Doc(), build.Doc()):
        d.figure("qk_means", small, "s", [run.id], ["qk_means"])
    assert calls == ["qk_means"] * 3 and len(doc.objects) == 2  # kept objects drawn each time; then once
    key = functools.partial(key_of, counting["qk_means"], kwargs={}, height=None)
    assert key(listed) == key(listed.copy()) != key(listed.assign(cells=[[1], [3]]))  # a list in a cell: its repr
    assert key(listed.rename(columns={"cells": "other"})) != key(listed) != key(listed.set_index("layer"))
    assert key_of(counting["qk_means"], listed, kwargs={"table": listed}) is None  # not plain data: not kept
    assert len(kept) == 2


SHIPPED = B.REPO / "results" / "repro"


def _shipped_report(tmp_path, ids, name="r.html"):
    """build_report over shipped runs (own store empty, as `workbench report` opens it): (summary, html)."""
    from workbench.report import build_report
    from workbench.store import StoreSet

    if not all((SHIPPED / i).is_dir() for i in ids):
        pytest.skip("no shipped results in this checkout")
    (tmp_path / "own").mkdir(exist_ok=True)
    s = build_report(StoreSet.open(tmp_path / "own", shipped=SHIPPED), "id=" + "|".join(ids), tmp_path / name)
    return s, (tmp_path / name).read_text(encoding="utf-8")


def test_a_report_of_two_rope_seeds_shows_no_experiment_it_cannot_compare(tmp_path):
    """Two plain RoPE seeds hold one side of each experiment (no partial run, no MLA / NoPE, no RoPE+sinusoidal): no
    experiment table, and the note says what each needs. The paper-scale GPU runs beside the shipped store are read
    (results/paper), as the Findings page reads them; the claims no selected run answers are not listed as pending
    runs; every link of the contents reaches its section; summary.json is named after the report."""
    ids = ["t1-rope-repro-s42-e451f6", "t1-rope-repro-s43-096a4b"]
    s, text = _shipped_report(tmp_path, ids)
    section = text.split('<section id="experiments">')[1].split("</section>")[0]
    assert "<h3>" not in section and s["experiments"] == {}
    assert "partial RoPE needs a full and a partial RoPE run" in section
    if (SHIPPED.parent / "paper" / "t1-rope-paper-s42-82c372").is_dir():
        assert "At the paper&#x27;s own scale" in text or "At the paper's own scale" in text
    findings = text.split('<section id="findings">')[1].split("</section>")[0]
    claims = findings.split("The claims and their evidence")[1]
    assert ">pending<" not in claims and "claim row(s) pending: this selection holds no finished run" in findings
    rules = findings.split("The registered rules")[1]  # every rule, its version, and what changed since
    assert "rope-deposit-first-layer" in rules and "Changed: the share decision" in rules
    toc = text.split('<nav class="toc">')[1].split("</nav>")[0]
    anchors = re.findall(r'href="#([^"]+)"', toc)
    assert anchors[:3] == ["findings", "settings", "runs"] and all(f'id="{a}"' in text for a in anchors)
    assert (tmp_path / "r.summary.json").is_file() and not (tmp_path / "summary.json").exists()
    # the shipped runs have no weights: a missing table's command re-creates the run first
    assert all(r["source"] == "shipped" for r in s["runs"])
    if any(r["tables"]["missing"] for r in s["runs"]):
        assert "workbench recreate" in text


def test_summary_json_redraws_every_figure_drawn_from_one_stored_table(report, smoke):
    """summary.json's recipe: a figure with `derived` null is FIGURES[figure](its run's stored table, **kwargs), and
    draws the same traces again; every other figure names what derived its table."""
    from workbench.figures import FIGURES
    from workbench.store import RunStore

    store = RunStore(smoke.root)
    _, _, summary = report
    stored = [f for f in summary["figures"] if f["derived"] is None]
    assert stored and any(f["derived"] for f in summary["figures"])
    for f in stored:
        assert len(f["runs"]) == 1 and len(f["tables"]) == 1, f
        fig = FIGURES[f["figure"]](store.get(f["runs"][0]).load_table(f["tables"][0]), **f["kwargs"])
        assert len(fig.data) == f["n_traces"], f


def test_missing_tables_count_the_heads_tables(report, smoke):
    """`missing` (the CLI's count) names every table the report's per-run sections show that a run lacks, the heads'
    tables included: the created run lacks them all."""
    from workbench.report.heads import FIGURES as HEADS

    _, _, summary = report
    created = {r["id"]: r for r in summary["runs"]}[smoke.created]
    assert {"ablation"} | {t for t, _, _ in HEADS} <= set(created["tables"]["missing"])


def test_the_view_per_setting_keeps_the_seed_study_apart(tmp_path):
    """At `repro-long`, MLA's seed-42 run (before the registration) and two seed-study runs: two rows and two atlases,
    never one pool; seeds as training/data seed; each status with its count."""
    from workbench.analysis.findings import MemoStore
    from workbench.report.build import Doc
    from workbench.report.overview import finished_table, settings_section
    from workbench.report import select_runs
    from workbench.store import StoreSet

    ids = ["t1-mla-repro-long-s42-9024dc", "t1-mla-repro-long-s45-d43-7eb13a", "t1-mla-repro-long-s45-d44-ee1f90"]
    if not all((SHIPPED / i).is_dir() for i in ids):
        pytest.skip("no shipped results in this checkout")
    (tmp_path / "own").mkdir()
    store = MemoStore(StoreSet.open(tmp_path / "own", shipped=SHIPPED))
    rt = finished_table(store, select_runs(store, {"id": ids}))
    doc = Doc()
    settings_section(doc, store, rt, lambda msg: None)
    text = "\n".join(doc.parts)
    assert "<td>seed study</td>" in text and "<td>before the study</td>" in text
    assert "<td>45/d43, 45/d44</td>" in text and "<td>42</td>" in text
    notes = re.findall(r"mla, trigger-distance, ([^:]+): zero-ablation atlas, mean over (\d) run", text)
    assert sorted(notes) == [("before the study", "1"), ("seed study", "2")]
    from workbench.analysis.claims import is_study

    for study in (True, False):  # each group's statuses, counted
        statuses = list(rt.loc[is_study(rt) == study, "status"])
        assert all(f"{statuses.count(st)} {st}" in text for st in statuses)


def test_what_a_run_cannot_have_is_read_from_its_model_config(tmp_path):
    """`not_applicable` reads the run's model section: `learned` has no rotary planes and no table past its training
    length; the authors' MLA (a trained input position table) cannot extrapolate either; RoPE can have both. The
    Extrapolation page then says the analysis does not apply (it sent the user to re-create the run, 12-22 minutes,
    for a Run that ended "not applicable")."""
    from apps.pages import _diagnostic, extrapolation
    from workbench.report.build import not_applicable
    from workbench.store import StoreSet

    ids = ["t1-learned-repro-s42-e0171b", "t2-mla-encoder-repro-s43-8ec444", "t1-rope-repro-s42-e451f6"]
    if not all((SHIPPED / i).is_dir() for i in ids):
        pytest.skip("no shipped results in this checkout")
    (tmp_path / "own").mkdir()
    store = StoreSet.open(tmp_path / "own", shipped=SHIPPED)
    learned, mla, rope = (not_applicable(store.get(i).config["model"]) for i in ids)
    assert set(learned) == {"angles", "extrapolation"} and list(mla) == ["extrapolation"] and rope == {}
    shown = str(_diagnostic.render(extrapolation.SPEC, store, [ids[0]]))
    assert f"does not apply to {ids[0]}" in shown and "workbench recreate" not in shown
