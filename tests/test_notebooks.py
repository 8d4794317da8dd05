"""The notebooks run top to bottom (nbclient) at the smoke preset, on a copy of the smoke store, so they never
rot. A failing cell fails the test with the cell's traceback."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import browser as B

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize("name", ["01_head_ablation.ipynb", "02_partial_rope_mla.ipynb",
                                  "03_patching_and_probes.ipynb"])
def test_notebook_executes_at_smoke_preset(name, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    smoke = B.smoke_store()
    work = tmp_path / "store"
    shutil.copytree(Path(smoke.root).parent, work)  # runs/ + data_cache/: the notebook may add runs
    monkeypatch.setenv("PELAB_PRESET", "smoke")
    monkeypatch.setenv("PELAB_THREADS", "1")
    monkeypatch.setenv("PELAB_RUNS", str(work / "runs"))
    monkeypatch.setenv("PELAB_DATA", str(work / "data_cache"))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # the notebook's figures were produced (plotly mime bundles), not just text
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs), "no plotly figure output"
