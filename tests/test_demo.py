"""`make demo`'s loop (datasets, grid, analyses, report) at the smoke preset, so it never rots."""
import json

import pytest

from workbench import demo
from workbench.store import RunStore
from workbench.train.presets import scale_disclaimer


@pytest.mark.slow
def test_demo_loop_at_smoke_preset(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PELAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("PELAB_DATA", str(tmp_path / "data"))
    demo.main(["--preset", "smoke", "--no-serve"])
    store = RunStore(tmp_path / "runs")
    runs = store.query()
    assert len(runs) == 4 and set(runs["status"]) == {"finished"}
    assert set(runs["scheme"]) == {"rope", "nope", "mla"} and set(runs["task"]) == {"trigger-distance",
                                                                                    "trigger-count"}
    for run_id in runs["id"]:
        tables = store.get(run_id).tables()
        assert {"ablation", "deposit", "qk_means", "spectral", "extrapolation"} <= set(tables), run_id
    summary = json.loads((tmp_path / "runs" / "summary.json").read_text())
    assert len(summary["runs"]) == 4 and summary["per_run_diagnostics"]
    assert (tmp_path / "runs" / "report.html").stat().st_size > 100_000  # plotly.js embedded
    out, err = capsys.readouterr()
    assert "deposit" in out
    # what differs from the paper's setup comes first, before the datasets and any training
    head = "Read this first: results at the smoke preset, not the paper's setup. 2 layers x 4 heads (paper 6 x 16)"
    assert out.index(head) < out.index("datasets (smoke preset)") and out.index(head) < (out + err).index("epoch 1/2")
    assert summary["disclaimers"] == {"smoke": scale_disclaimer("smoke")}  # and the report opens with its box
    # the first report comes before the slow analyses, the full one after them
    first, full = out.index("first report written:"), out.index("full report written:")
    assert out.index("probes: ran") > first and out.index("patching: ran") > first and full > out.rindex("probes:")
    assert out.index("deposit: ran") < first
    # the log: a line per epoch and per analysis, no progress bars (stderr is not a terminal here)
    assert "\r" not in out + err
    assert (out + err).count("epoch 1/2:") == 4 and (out + err).count("epoch 2/2:") == 4  # two runs at a time
    assert out.count(" head_summary: ran in ") == 4
