"""`workbench data make|show` through typer's CliRunner."""
import os

from rich.console import Console
from typer.testing import CliRunner

import synthetic_tasks as st
from workbench.cli import data

runner = CliRunner()


def _app():
    from workbench.cli import app  # the real command group: its error path turns bad input into exit 2

    return app


def test_make_and_show(tmp_path):
    app = _app()
    r = runner.invoke(app, ["data", "make", "--task", "trigger-distance", "--preset", "smoke", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    ds = st.load_or_generate(st.get_spec("trigger-distance", "smoke"), tmp_path)
    assert os.listdir(tmp_path) == [os.path.basename(ds.path)]
    assert ds.hash[:16] in r.output and "shifted" in r.output and "n_classes 16" in r.output

    r = runner.invoke(app, ["data", "show", ds.path, "--n", "3", "--split", "shifted"])
    assert r.exit_code == 0, r.output
    w1 = ds.trigger_ids[0]
    assert f"[T:w{w1}]" in r.output and "manifest" in r.output and ds.hash[:16] in r.output
    assert str(ds.extrap["shifted"][1][0]) in r.output
    r = runner.invoke(app, ["data", "show", os.path.join(ds.path, "manifest.json"), "--json"])
    assert r.exit_code == 0 and '"generator_version"' in r.output

    r = runner.invoke(app, ["data", "show", str(tmp_path / "nope")])
    assert r.exit_code == 2 and r.output.startswith("error: ")


def test_make_all_seed_set_and_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PELAB_DATA", str(tmp_path))
    r = runner.invoke(_app(), ["data", "make", "-t", "all", "-p", "smoke", "--seed", "3", "--set", "extrap_size=10"])
    assert r.exit_code == 0, r.output
    names = sorted(os.listdir(tmp_path))
    assert [n.split("-")[1] for n in names] == ["count", "distance"]
    for n in names:
        ds = st.load_dataset(tmp_path / n)
        assert ds.spec.seed == 3 and ds.spec.extrap_size == 10 and len(ds.extrap["len2x"][1]) <= 10


def test_make_bad_spec(tmp_path):
    r = runner.invoke(_app(), ["data", "make", "-p", "smoke", "--set", "middle_max=200", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "middle_max" in r.output and not os.listdir(tmp_path)
    r = runner.invoke(_app(), ["data", "make", "-p", "nope", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "preset" in r.output


def test_summary_table():
    ds = st.generate(st.get_spec("trigger-count", "smoke"))
    con = Console(record=True, width=120)
    con.print(data.summary_table(ds))
    text = con.export_text()
    assert "len1.5x" in text and f"{len(ds.train_y):,}" in text and "0..12" in text
    assert data.sparkline([0, 1, 8]) == " ▁█"


def test_help_keeps_paragraphs_and_joins_their_lines():
    """`--help` of a command whose docstring spans several source lines a paragraph: on a wide terminal each
    paragraph is one line (Typer keeps a docstring's line breaks after the first paragraph; the CLI joins them),
    and the paragraphs stay apart."""
    r = runner.invoke(_app(), ["verify", "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    assert r.exit_code == 0, r.output
    lines = [ln.strip(" │") for ln in r.output.splitlines()]
    joined = [ln for ln in lines if "match: verified when every metric agrees within --tol" in ln]
    assert len(joined) == 1, r.output  # was broken after "verified when" (a source line's end)
    assert "(workbench.analysis.reproduce.CHANGES), which is compared" in joined[0]  # two source lines further
    assert any(ln.startswith("--refresh: where the metrics are bit-identical") for ln in lines)  # its own paragraph
    r = runner.invoke(_app(), ["train", "--help"], env={"COLUMNS": "400"}, terminal_width=400)
    assert "[OPTIONS] [RUN_ID]" in r.output and "[[RUN_ID]]" not in r.output  # optional: one pair of brackets
