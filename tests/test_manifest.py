"""Issue 43: shipped results that prove themselves. Every shipped byte is hashed (manifest.json) and a changed one
is named as damage on every surface; `verify` works across machines and never trusts what it did not check; bad
inputs are refused with exit 2 and create nothing; a dirty run ships only with its diff. Every test here failed
before its fix."""
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.store import RunStore, StoreError, StoreSet, finished_runs
from workbench.store.manifest import check_store, write_manifest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "results" / "repro"
ROPE_T1 = [r for r in ("t1-rope-repro-s42-e451f6", "t1-rope-repro-s43-096a4b", "t1-rope-repro-s44-7eff0c",
                       "t1-nope-repro-s42-9a509a") if (SHIPPED / r).is_dir()]
TINY = ["model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_layers=2", "task.n_examples=400",
        "train.batch_size=32", "train.epochs=2", "train.batching=length"]


def _app():
    from workbench.cli import app

    return app


def _copy(tmp_path: Path, ids) -> Path:
    if len(ids) < 4:
        pytest.skip("no shipped results in this checkout")
    dst = tmp_path / "shipped"
    for rid in ids:
        shutil.copytree(SHIPPED / rid, dst / rid)
    return dst


def _flip_mid_table(folder: Path) -> None:
    """One byte flipped in the middle of tables.parquet: its footer still reads (the table decodes to other
    numbers)."""
    p = folder / "tables.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


def _damage_three(root: Path) -> dict[str, str]:
    """A flipped byte mid tables.parquet, a truncated bundle, a garbage metrics.jsonl; {run id: file}."""
    a, b, c = ROPE_T1[:3]
    _flip_mid_table(root / a)
    (root / b / "tables.parquet").write_bytes((root / b / "tables.parquet").read_bytes()[:100])
    (root / c / "metrics.jsonl").write_bytes(b"\x00garbage{{{\n")
    return {a: "tables.parquet", b: "tables.parquet", c: "metrics.jsonl"}


# ---- the manifest ----------------------------------------------------------------------------------------------
def test_the_checked_in_shipped_results_match_their_manifests():
    """What `make test` checks first: every shipped run of the checkout has a manifest its bytes match."""
    if not SHIPPED.is_dir():
        pytest.skip("no shipped results in this checkout")
    bad, ids = check_store(SHIPPED)
    assert bad == {} and len(ids) >= 200
    assert all((SHIPPED / rid / "manifest.json").is_file() for rid in ids)
    paper = SHIPPED.parent / "paper"  # the paper-scale runs the GPU windows shipped
    if paper.is_dir():
        bad, ids = check_store(paper)
        assert bad == {} and ids and all((paper / rid / "manifest.json").is_file() for rid in ids)


def test_a_flipped_byte_mid_tables_is_named_damage_and_never_read(tmp_path):
    """The bundle's footer still reads (before: `compare` exit 0 with a moved mean_logit); now the run is
    "damaged: tables.parquet changed since it was shipped" for get, the index, finished_runs and `check`."""
    from workbench.store.bundle import bundle_names

    root = _copy(tmp_path, ROPE_T1)
    rid = ROPE_T1[0]
    _flip_mid_table(root / rid)
    assert bundle_names(root / rid / "tables.parquet")  # the footer reads: only the manifest can tell
    store = RunStore(root, readonly=True)
    with pytest.raises(StoreError, match="damaged: tables.parquet changed since it was shipped"):
        store.get(rid)
    assert store.query().set_index("id").loc[rid, "status"] == "corrupt"
    assert list(store.damaged()) == [rid] and "tables.parquet changed since it was shipped" in store.damaged()[rid]
    runs, corrupt = finished_runs(store)
    assert rid not in {r.id for r in runs} and list(corrupt) == [rid]
    res = CliRunner().invoke(_app(), ["check", str(root)])
    assert res.exit_code == 1 and f"{rid}: tables.parquet changed since it was shipped" in res.output
    assert "1 of 4 shipped runs" in res.output


def test_check_passes_a_whole_store_and_refuses_a_missing_one(tmp_path):
    root = _copy(tmp_path, ROPE_T1)
    res = CliRunner().invoke(_app(), ["check", str(root)])
    assert res.exit_code == 0 and "4 shipped runs" in res.output
    (root / ROPE_T1[1] / "manifest.json").unlink()
    res = CliRunner().invoke(_app(), ["check", str(root)])
    assert res.exit_code == 1 and f"{ROPE_T1[1]}: no manifest.json" in res.output
    res = CliRunner().invoke(_app(), ["check", str(tmp_path / "typo")])
    assert res.exit_code == 2 and "not a folder" in res.output and not (tmp_path / "typo").exists()
    # one folder too high (results/ for results/repro): no run there, the store below named; nothing written
    res = CliRunner().invoke(_app(), ["check", str(root.parent), "--write-missing"])
    assert res.exit_code == 2 and f"no shipped run in {root.parent}; did you mean {root}?" in res.output
    assert not (root / "manifest.json").exists() and not (root.parent / "manifest.json").exists()
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(_app(), ["check", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no shipped run in" in res.output


def test_ship_writes_a_manifest_of_every_shipped_file(tmp_path):
    """ship_run hashes config, run.json (whole file, `shipped` included), metrics, tables and code.diff; editing
    any of them afterwards is damage."""
    from workbench.store.ship import ship_run

    src = _copy(tmp_path, ROPE_T1)
    rid = ROPE_T1[3]
    own = tmp_path / "own"
    shutil.copytree(src / rid, own / rid)
    (own / rid / "manifest.json").unlink()
    (own / rid / "code.diff").write_text("diff --git a/x b/x\n")
    ship_run(RunStore(own).get(rid), tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / rid / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["code.diff", "config.json", "metrics.jsonl", "run.json", "tables.parquet"]
    assert check_store(tmp_path / "out")[0] == {}
    info = json.loads((tmp_path / "out" / rid / "run.json").read_text())
    (tmp_path / "out" / rid / "run.json").write_text(json.dumps(dict(info, shipped="2000-01-01")))
    with pytest.raises(StoreError, match="damaged: run.json changed since it was shipped"):
        RunStore(tmp_path / "out", readonly=True).get(rid)


def test_refresh_tables_refuses_a_damaged_run_or_a_table_it_was_not_shipped_with_and_changes_nothing(tmp_path):
    """`store.ship.refresh_tables` (what `verify --refresh` writes with): a shipped folder that does not match its
    manifest is refused naming the file, a table the run was not shipped with is refused; either way every file
    is as it was and no staging folder is left. Refreshing one table keeps the others and their bytes' values."""
    import pandas as pd

    from workbench.store.ship import refresh_tables

    src = _copy(tmp_path, ROPE_T1)
    rid, other = ROPE_T1[0], ROPE_T1[1]
    run = RunStore(src, readonly=True).get(rid)
    qk = run.load_table("qk_means")
    snapshot = {p.name: p.read_bytes() for p in (src / rid).iterdir()}
    with pytest.raises(StoreError, match="was not shipped with nonesuch: only shipped tables are refreshed"):
        refresh_tables(src, rid, {"nonesuch": qk}, {}, {"refreshed": "now"})
    assert {p.name: p.read_bytes() for p in (src / rid).iterdir()} == snapshot
    _flip_mid_table(src / other)
    damaged = {p.name: p.read_bytes() for p in (src / other).iterdir()}
    with pytest.raises(StoreError, match="damaged: tables.parquet changed since it was shipped"):
        refresh_tables(src, other, {"qk_means": qk}, {}, {"refreshed": "now"})
    assert {p.name: p.read_bytes() for p in (src / other).iterdir()} == damaged
    assert not list(src.glob(".*"))  # nothing staged, nothing set aside
    refresh_tables(src, rid, {"qk_means": qk.assign(mean=qk["mean"] * 0)}, {"qk_means": {"analysed": "x"}},
                   {"refreshed": "now"})
    again = RunStore(src, readonly=True).get(rid)
    assert again.tables() == run.tables() and again.provenance_of("qk_means") == {"analysed": "x"}
    assert (again.load_table("qk_means")["mean"] == 0).all()
    pd.testing.assert_frame_equal(again.load_table("ablation"), run.load_table("ablation"))
    assert json.loads((src / rid / "run.json").read_text())["refreshed"] == [{"refreshed": "now"}]
    assert check_store(src)[0].keys() == {other}


def retrained(folder: Path) -> None:
    """run.json records its metrics' sha256, as the training that wrote them does (a re-training, simulated)."""
    from workbench.store.manifest import sha256_file

    info = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps(dict(info, metrics_sha256=sha256_file(folder / "metrics.jsonl"))))


def test_a_retraining_with_other_metrics_does_not_replace_the_shipped_run_unless_asked(tmp_path, monkeypatch):
    """A run re-trained on a machine of other numerics is another trajectory with the same id: shipping it over the
    shipped copy would replace the shipped results, not add tables to them. ship_run and `workbench ship` refuse,
    naming both runs' code and CPU, before any analysis; `--replace` overwrites; the same run ships again (its
    tables added) as before, and so does a re-training whose metrics differ only in their timings."""
    from workbench.store.ship import ship_run

    src = _copy(tmp_path, ROPE_T1)
    rid = ROPE_T1[3]
    own = tmp_path / "own"
    shutil.copytree(src / rid, own / rid)
    (own / rid / "code.diff").write_text("diff --git a/x b/x\n")
    retrained(own / rid)  # trained before run.json recorded the digest: as a training records it now
    dest = tmp_path / "out"
    ship_run(RunStore(own).get(rid), dest)
    ship_run(RunStore(own).get(rid), dest)  # the same metrics: shipped again
    metrics = (own / rid / "metrics.jsonl").read_text().splitlines()
    first = json.loads(metrics[0])
    metrics[0] = json.dumps(dict(first, epoch_time_s=first["epoch_time_s"] * 2, time="2026-11-28T00:00:00+00:00"))
    (own / rid / "metrics.jsonl").write_text("\n".join(metrics) + "\n")
    with pytest.raises(StoreError, match="its files are not what its training wrote .*metrics.jsonl changed"):
        ship_run(RunStore(own).get(rid), dest)  # metrics edited after training: never shipped
    retrained(own / rid)
    ship_run(RunStore(own).get(rid), dest)  # a bit-identical re-training (its timings differ): ships over it
    assert json.loads((dest / rid / "metrics.jsonl").read_text().splitlines()[0])["time"].startswith("2026-11-28")
    metrics[0] = json.dumps(dict(first, train_loss=first["train_loss"] + 1e-6))
    (own / rid / "metrics.jsonl").write_text("\n".join(metrics) + "\n")
    retrained(own / rid)
    shipped_before = (dest / rid / "metrics.jsonl").read_bytes()
    with pytest.raises(StoreError, match="shipped with other metrics .*a re-training, not the shipped run"):
        ship_run(RunStore(own).get(rid), dest)
    assert (dest / rid / "metrics.jsonl").read_bytes() == shipped_before
    from workbench.analysis import suite

    monkeypatch.setattr(suite, "run_suite", lambda *a, **k: pytest.fail("analysed a run it then refused to ship"))
    res = CliRunner().invoke(_app(), ["ship", rid, "--root", str(own), "--to", str(dest)])
    assert res.exit_code == 1 and "pass --replace" in res.output and "1 failed" in res.output
    assert (dest / rid / "metrics.jsonl").read_bytes() == shipped_before
    res = CliRunner().invoke(_app(), ["ship", rid, "--root", str(own), "--to", str(dest), "--replace",
                                      "--no-analyze"])
    assert res.exit_code == 0, res.output
    assert (dest / rid / "metrics.jsonl").read_bytes() == (own / rid / "metrics.jsonl").read_bytes()
    assert check_store(dest)[0] == {}


def test_a_reship_keeps_the_shipped_tables_the_run_lacks(tmp_path):
    """Shipped again from a copy of the same model that lacks some of the shipped tables (analysed elsewhere, or
    refreshed there), the shipped folder keeps them, each with its provenance, and its `refreshed` record: a re-ship
    adds tables, never drops one (it replaced the whole folder: the tables were lost without a word)."""
    import pandas as pd

    from workbench.store.ship import is_shipped, ship_run

    src = _copy(tmp_path, ROPE_T1)
    rid = ROPE_T1[3]
    own, dest = tmp_path / "own", tmp_path / "out"
    shutil.copytree(src / rid, own / rid)
    (own / rid / "code.diff").write_text("diff --git a/x b/x\n")
    ship_run(RunStore(own).get(rid), dest)
    first = RunStore(dest, readonly=True).get(rid)
    names = sorted(first.tables())
    assert len(names) >= 2
    before = {n: (first.load_table(n), first.provenance_of(n)) for n in names}
    info = json.loads((dest / rid / "run.json").read_text())  # as `verify --refresh` leaves it
    (dest / rid / "run.json").write_text(json.dumps(dict(info, refreshed=[{"tables": names[1:], "by": "x"}])))
    from workbench.store.manifest import write_manifest

    write_manifest(dest / rid)
    (own / rid / "tables.parquet").unlink()  # the own copy now holds one table only
    (own / rid / "manifest.json").unlink()
    RunStore(own).get(rid).save_table(names[0], before[names[0]][0])
    assert RunStore(own).get(rid).tables() == [names[0]]
    ship_run(RunStore(own).get(rid), dest)
    again = RunStore(dest, readonly=True).get(rid)
    assert sorted(again.tables()) == names
    for n in names[1:]:
        pd.testing.assert_frame_equal(again.load_table(n), before[n][0])
        assert again.provenance_of(n) == before[n][1]
    assert again.info["refreshed"][-1] == {"tables": names[1:], "by": "x"}
    assert is_shipped(RunStore(own).get(rid), dest) and check_store(dest)[0] == {}


def test_ship_analyses_on_the_device_it_is_given_and_on_the_cpu_when_that_fails(tmp_path, monkeypatch):
    """`ship --device`: the head ablations on that device (the GPU window's: 153 s on its CPU for one paper-scale
    run), recorded in the table's `analysed_on`; an error there (e.g. the GPU out of memory beside the sweep)
    analyses again on the CPU and still ships; a device this machine lacks, or none torch knows, is refused before
    anything is analysed or written."""
    import torch

    from workbench.analysis import suite
    from workbench.cli.repro import _ship_one
    from workbench.train import resolve_config, train

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    run = train(resolve_config("smoke", "rope", "t1", sets=TINY, store=store), store, progress=False, device="cpu",
                threads=1)
    real, calls = suite.run_suite, []

    def run_suite(run, device="cpu", **kw):
        calls.append(device)
        if device != "cpu":
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(run, device=device, **kw)

    monkeypatch.setattr(suite, "run_suite", run_suite)
    dest = tmp_path / "out"
    assert _ship_one(store, run.id, dest, analyze=True, n_boot=20, max_examples=100, tables=["ablation"],
                     device="cuda") == "shipped"
    assert calls == ["cuda", "cpu"]
    table = RunStore(dest, readonly=True).get(run.id).load_table("ablation")
    assert set(table["analysed_on"]) == {"cpu"}
    if not torch.cuda.is_available():
        res = CliRunner().invoke(_app(), ["ship", run.id, "--root", str(store.root), "--to", str(tmp_path / "o2"),
                                          "--device", "cuda"])
        assert res.exit_code == 2 and "has no CUDA GPU" in res.output and not (tmp_path / "o2").exists()
    res = CliRunner().invoke(_app(), ["ship", run.id, "--root", str(store.root), "--to", str(tmp_path / "o3"),
                                      "--device", "tpu"])
    assert res.exit_code == 2 and "use cpu or cuda" in res.output and not (tmp_path / "o3").exists()
    assert calls == ["cuda", "cpu"]


# ---- damage named on every surface -----------------------------------------------------------------------------
def _post(app, client, output_key: str, values: dict, state: dict | None = None):
    """POST one callback as the browser would; the JSON response (asserting no HTTP 500)."""
    spec = app.callback_map[output_key]
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in output_key.strip(".").split("...")]
    outs = outs if output_key.startswith("..") else outs[0]  # a single output is sent as one object
    ins = [{"id": i["id"], "property": i["property"], "value": values.get(i["id"])} for i in spec["inputs"]]
    st = [{"id": s["id"], "property": s["property"], "value": (state or {}).get(s["id"])} for s in spec["state"]]
    r = client.post("/_dash-update-component", json={"output": output_key, "outputs": outs, "inputs": ins,
                                                      "state": st, "changedPropIds": [f"{ins[0]['id']}.value"]})
    assert r.status_code in (200, 204), r.get_data(as_text=True)[:500]
    return json.dumps(r.get_json(), ensure_ascii=False) if r.status_code == 200 else ""


def _dropdowns(component):
    """Every dcc.Dropdown in a layout."""
    from dash import dcc

    if isinstance(component, dcc.Dropdown):
        yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children]:
        if child is not None and not isinstance(child, (str, int, float)):
            yield from _dropdowns(child)


def test_the_runs_page_and_every_picker_name_damaged_runs(tmp_path):
    """On a shipped copy with a flipped byte mid tables.parquet, a truncated bundle and a garbage metrics.jsonl:
    the Runs page's index and compare callbacks answer (before: HTTP 500 from `_describe` on the truncated bundle)
    and name each damaged run with its file; every page's layout builds and its run pickers list the damaged runs
    disabled, with the reason; nothing shows a server path."""
    import plotly

    from apps import common as C
    from apps import create_app, page_modules

    root = _copy(tmp_path, ROPE_T1)
    files = _damage_three(root)
    (tmp_path / "own").mkdir()
    app = create_app(tmp_path / "own", shipped=root, cache_dir=tmp_path / "cache")
    client = app.server.test_client()
    index_key = next(k for k in app.callback_map if "runs-index.children" in k)
    text = _post(app, client, index_key, {"runs-f-setting": None, "runs-show": "schemes"})
    for rid, name in files.items():
        assert f"damaged — {rid}" in text and name in text
    compare_key = next(k for k in app.callback_map if k.startswith("runs-compare.children"))
    good = ROPE_T1[3]
    for a in files:
        text = _post(app, client, compare_key, {"runs-cmp-a": a, "runs-cmp-b": good, "runs-metric": "accuracy"})
        assert "damaged" in text and a in text
    text = _post(app, client, compare_key, {"runs-cmp-a": good, "runs-cmp-b": None, "runs-metric": "accuracy"})
    assert "damaged" not in text
    with app.server.test_request_context():
        store = C.stores()
        assert sorted(store.damaged()) == sorted(files)
        options = C.run_options(C.index(store))
        off = {o["value"]: o["label"] for o in options if o.get("disabled")}
        assert sorted(off) == sorted(files) and all(files[r] in off[r] and "damaged" in off[r] for r in off)
        assert [o["value"] for o in options if not o.get("disabled")] == [good]
        pickers = 0
        for m in page_modules():
            layout = m.layout()
            assert str(tmp_path) not in json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder)
            for dd in _dropdowns(layout):
                opts = [o for o in (getattr(dd, "options", None) or []) if isinstance(o, dict) and o.get("value") in ROPE_T1]
                if opts:  # a run picker
                    pickers += 1
                    off = {o["value"] for o in opts if o.get("disabled") and "damaged" in o["label"]}
                    assert off == set(files), (m.NAME, dd.id)
        assert pickers >= 4


def test_runs_cli_names_the_damage(tmp_path):
    """`workbench runs --shipped` listed the truncated-bundle and garbage-metrics runs as finished."""
    root = _copy(tmp_path, ROPE_T1)
    files = _damage_three(root)
    (tmp_path / "own").mkdir()
    res = CliRunner().invoke(_app(), ["runs", "--root", str(tmp_path / "own"), "--shipped", str(root)])
    assert res.exit_code == 0, res.output
    for rid, name in files.items():
        line = next(ln for ln in res.output.splitlines() if ln.startswith("damaged:") and rid in ln)
        assert name in line
    assert res.output.count("finished") == 1  # the one good run


# ---- verify across machines, never trusting the unchecked ------------------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny finished run, trained here and shipped (no analyses): (base, run id, env)."""
    from workbench.store.ship import ship_run
    from workbench.train import resolve_config, train

    base = tmp_path_factory.mktemp("verify")
    own = RunStore(base / "runs", data_dir=base / "data")
    run = train(resolve_config("smoke", "rope", "trigger-distance", sets=TINY, store=own), own, progress=False,
                threads=1)
    ship_run(run, base / "results", allow_dirty="a test fixture")
    return base, run.id, {"PELAB_DATA": str(base / "data")}


def test_training_records_its_numerics_and_metrics_digest(tiny):
    import hashlib

    import torch

    base, rid, _ = tiny
    info = json.loads((base / "runs" / rid / "run.json").read_text())
    n = info["numerics"]
    assert n["torch"] == torch.__version__ and n["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert n["threads"] == 1 and n["blas"] and n["parallel_backend"]
    assert info["metrics_sha256"] == hashlib.sha256((base / "runs" / rid / "metrics.jsonl").read_bytes()).hexdigest()


def _fake_shipped(tiny, tmp_path, capability: str, test_acc: float | None) -> Path:
    """A copy of the shipped run recording another CPU capability (and, optionally, another final test accuracy),
    with a manifest that matches (a consistent shipped folder from another machine)."""
    base, rid, _ = tiny
    fake = tmp_path / "fake"
    shutil.copytree(base / "results" / rid, fake / rid, dirs_exist_ok=True)
    info = json.loads((fake / rid / "run.json").read_text())
    info["numerics"]["cpu_capability"] = capability
    rows = [json.loads(line) for line in (fake / rid / "metrics.jsonl").read_text().splitlines()]
    if test_acc is not None:
        rows[-1]["test_acc"] = info["final"]["test_acc"] = test_acc
    (fake / rid / "run.json").write_text(json.dumps(info))
    (fake / rid / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(fake / rid)
    return fake


def test_verify_judges_a_rerun_by_the_stated_rule_when_the_numerics_differ(tiny, tmp_path):
    """A run shipped from a machine with another SIMD level: verify names what differs and judges the re-run by
    one rule (before: "NOT verified" with no explanation)."""
    from workbench.analysis.reproduce import RULE

    base, rid, env = tiny
    acc = json.loads((base / "results" / rid / "run.json").read_text())["final"]["test_acc"]
    fake = _fake_shipped(tiny, tmp_path, "NOT-THIS-ISA", round(acc + 0.01, 6))
    args = ["verify", rid, "--shipped", str(fake), "--root", str(tmp_path / "mine"), "-q"]
    res = CliRunner().invoke(_app(), args, env=env)
    assert res.exit_code == 0, res.output
    assert "numerics differ: cpu_capability: shipped 'NOT-THIS-ISA'" in res.output
    assert RULE in res.output and f"{rid}: reproduced statistically" in res.output and "within [" in res.output
    # said before it trains, as `recreate` says it: another trajectory from the first step
    assert res.output.index("note: this machine's numerics differ") < res.output.index("numerics differ: cpu")

    fake = _fake_shipped(tiny, tmp_path, "NOT-THIS-ISA", 1.0)  # far outside the interval
    res = CliRunner().invoke(_app(), args, env=env)
    assert res.exit_code == 1 and f"{rid}: NOT verified" in res.output and "outside [" in res.output
    assert "re-training it" not in res.output  # the own copy checked out: re-used
    assert "note: this machine's numerics differ" not in res.output  # nothing trains: no note


def test_recreate_says_first_when_the_machines_numerics_differ_from_the_shipped_runs(monkeypatch):
    """`workbench recreate` names, before it trains, what of the shipped run's recorded numerics differs here (a
    run shipped from an AVX-512 machine re-trained at AVX2 follows another trajectory); nothing when the recorded
    numerics are this machine's, nor a lower SIMD level the re-training is held to (`simd_hold`). This machine is
    made an AVX2 one, so both cases are tested whatever it is (an AVX-512 machine holds a run from AVX2)."""
    import torch

    from workbench.train.recreate import numerics_note
    from workbench.store.run import numerics_identity

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    here = numerics_identity()
    assert here["cpu_capability"] == "AVX2"
    assert numerics_note({"numerics": here, "threads": here["threads"]}) is None

    def note(level):
        return numerics_note({"torch_version": torch.__version__, "threads": 1,
                              "machine": {"cpu_capability": level, "cpu_vendor": here["cpu_vendor"]}}, threads=1)

    higher = note("AVX512")
    assert "cpu_capability AVX512 there, AVX2 here" in higher
    assert "another trajectory" in higher and "blas" not in higher  # what the old record does not say is not named
    assert note("DEFAULT") is None  # held to DEFAULT, as it was trained: nothing differs
    # a run trained before run.json recorded its SIMD level (111 of results/repro's): it cannot be held, and says so
    unknown = numerics_note({"torch_version": torch.__version__, "threads": 1,
                             "machine": {"cpu": "Intel(R) Xeon(R) Processor @ 2.10GHz"}}, threads=1)
    assert unknown.startswith("note: the shipped run did not record its SIMD level or BLAS (trained on Intel(R) "
                              "Xeon(R) Processor @ 2.10GHz") and "this machine's (AVX2)" in unknown
    assert numerics_note({"torch_version": torch.__version__, "threads": 1, "device": "cuda", "machine": {}},
                         threads=1) is None  # a GPU run: no SIMD level to hold


def _shipped_from_default_kernels(tmp_path, env: dict, sets: list[str] = ()) -> tuple[RunStore, str]:
    """A tiny run trained in a child with ATen held to its DEFAULT kernels (as a run from a lower SIMD level than
    this machine's), shipped to tmp_path/results: (its store, its id)."""
    import subprocess
    import sys

    from workbench.store.ship import ship_run

    args = ["train", "--preset", "smoke", "--scheme", "rope", "--task", "t1", "--threads", "1", "-q", "--root",
            str(tmp_path / "there")] + [a for s in [*TINY, *sets] for a in ("--set", s)]
    subprocess.run([sys.executable, "-m", "workbench", *args], env=env | {"ATEN_CPU_CAPABILITY": "default"},
                   check=True, capture_output=True)
    there = RunStore(tmp_path / "there")
    (rid,) = [r.id for r in finished_runs(there)[0]]
    assert there.get(rid).info["numerics"]["cpu_capability"] == "DEFAULT"
    ship_run(there.get(rid), tmp_path / "results", allow_dirty="a test fixture")
    return there, rid


@pytest.mark.slow
def test_a_held_re_training_ends_with_the_process_that_started_it(tmp_path):
    """The held child (`recreate._train_held`) exits when its parent dies (a cancelled dashboard job, a killed
    command; `workers.exit_with_parent`): no training is left running behind it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil
    import torch

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT" or not sys.platform.startswith("linux"):
        pytest.skip("needs a machine above ATen's DEFAULT kernels, and Linux's process tools (psutil children)")
    env = os.environ | {"PELAB_DATA": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    # 8 epochs of 2,500 examples: about 4 s of training on a fast machine, many times the child's 0.2-s look at its
    # parent (2 epochs, 1 s in all, once finished before its 1-s look on an AVX-512 machine)
    _, rid = _shipped_from_default_kernels(tmp_path, env, ["task.n_examples=2500", "train.epochs=8"])
    code = ("import sys; from workbench.store import RunStore; from workbench.train.recreate import recreate; "
            "recreate(RunStore(sys.argv[1], readonly=True), RunStore(sys.argv[2]), sys.argv[3], threads=1)")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "results"), str(tmp_path / "mine"), rid],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        children, info = [], tmp_path / "mine" / rid / "run.json"
        for _ in range(1200):  # a deadline, not a speed check: until the child trains
            children = psutil.Process(parent.pid).children()
            if children and info.exists() and json.loads(info.read_text()).get("status") == "running":
                break
            time.sleep(0.1)
        assert children and children[0].is_running(), "the held child started and is training"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        gone, alive = psutil.wait_procs(children, timeout=60)
        assert not alive, "the held child outlived its parent"
        # ended by its parent's death, not by finishing its training (which it would, left alone)
        assert json.loads(info.read_text())["status"] != "finished", "the held child trained on to the end"
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.slow
def test_a_held_re_training_stopped_by_its_epoch_callback_is_left_interrupted_and_resumable(tmp_path):
    """`verify --refresh` stops a re-training at its first epoch off the shipped trajectory
    (`stop_at_first_difference`); held to a lower SIMD level it trains in a child (`_train_held`), which is ended
    there: its copy reads `interrupted`, with the reason, and resumes."""
    import os

    import torch

    from workbench.train.recreate import metric_differences, recreate, stop_at_first_difference

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this machine's ATen runs its DEFAULT kernels: there is no lower level to hold a re-run to")
    env = os.environ | {"PELAB_DATA": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    # 4 epochs of 2,000 examples at ATen's DEFAULT kernels: each far longer than the parent's 0.5-s look at the child
    _, rid = _shipped_from_default_kernels(tmp_path, env, ["task.n_examples=2000", "train.epochs=4"])
    shipped = RunStore(tmp_path / "results", readonly=True)
    rows = shipped.get(rid).metric_rows()
    rows[0] = rows[0] | {"test_acc": rows[0]["test_acc"] + 0.01}  # as another machine's floats would have it
    said = []
    run = recreate(shipped, RunStore(tmp_path / "mine", data_dir=tmp_path / "data"), rid, threads=1, tables=False,
                   on_epoch=stop_at_first_difference(rows), say=said.append)
    assert any("held to it" in s for s in said), said
    assert run.status == "interrupted" and 1 <= len(run.metric_rows()) < 4, (run.status, run.metric_rows())
    assert run.info["error"].startswith("epoch 1 of 4 is not the shipped run's (|difference| 0.01 in test_acc)")
    run = recreate(shipped, RunStore(tmp_path / "mine", data_dir=tmp_path / "data"), rid, threads=1, tables=False)
    assert run.status == "finished"  # resumed held, from the epoch it was stopped at: the shipped run bit for bit
    assert set(metric_differences(shipped.get(rid).metric_rows(), run.metric_rows()).values()) == {0.0}


@pytest.mark.slow
def test_a_run_shipped_from_a_lower_simd_level_is_retrained_held_to_it_and_verifies_bit_identically(tmp_path):
    """A CPU run trained at a lower SIMD level than this machine's (here: ATen's DEFAULT kernels, as an AVX2 run
    is on an AVX-512 machine) was re-trained at this machine's level, so its floats followed another trajectory
    and `verify` could only judge it statistically. Now `recreate` / `verify` re-train it in a child process with
    ATen held to the recorded level (ATEN_CPU_CAPABILITY): the re-run records that level, and its metrics are the
    shipped ones bit for bit; an unfinished copy started at this machine's level is trained again from the start,
    not resumed held. Without the hold the re-run would record this machine's level."""
    import os

    import torch

    from workbench.train import train
    from workbench.train.recreate import numerics_note, simd_hold

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this machine's ATen runs its DEFAULT kernels: there is no lower level to hold a re-run to")
    env = os.environ | {"PELAB_DATA": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    there, rid = _shipped_from_default_kernels(tmp_path, env)
    shipped_info = json.loads((tmp_path / "results" / rid / "run.json").read_text())
    assert simd_hold(shipped_info) == {"ATEN_CPU_CAPABILITY": "default"}
    assert simd_hold(shipped_info | {"device": "cuda"}) == {} and simd_hold({"numerics": None}) == {}
    if torch.backends.cpu.get_cpu_capability() == "AVX512":  # an AVX2 run: OpenBLAS held to its kernels too
        avx2 = shipped_info | {"numerics": shipped_info["numerics"] | {"cpu_capability": "AVX2"}}
        assert simd_hold(avx2) == {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell"}
    assert numerics_note(shipped_info, threads=1) is None  # the held level is the one the re-training runs at

    mine, where = tmp_path / "mine", ["--shipped", str(tmp_path / "results"), "--root", str(tmp_path / "mine"), "-q"]
    train(there.get(rid).config, RunStore(mine, data_dir=tmp_path / "data"), threads=1, progress=False,
          stop_after_epochs=1)  # an unfinished copy at this machine's level
    assert RunStore(mine).get(rid).status == "interrupted"  # resumed held, its epochs would mix two levels
    res = CliRunner().invoke(_app(), ["verify", rid, *where], env=env)  # its child: recreate._train_held
    assert res.exit_code == 0, res.output
    assert "re-training it with ATen's CPU kernels held to it (ATEN_CPU_CAPABILITY=default)" in res.output
    assert f"your unfinished copy was started at {torch.backends.cpu.get_cpu_capability()}: training it again" \
        in res.output and RunStore(mine).get(rid).info["resumed_from_epoch"] is None
    assert f"{rid}: verified (bit-identical; a re-training just now)" in res.output
    assert "numerics differ: cpu_capability" not in res.output
    assert RunStore(mine).get(rid).info["numerics"]["cpu_capability"] == "DEFAULT"
    first = RunStore(mine).get(rid).info["started"]
    res = CliRunner().invoke(_app(), ["recreate", rid, "--retrain", *where], env=env)
    assert res.exit_code == 0 and "held to it" in res.output, res.output
    assert RunStore(mine).get(rid).info["numerics"]["cpu_capability"] == "DEFAULT"
    assert RunStore(mine).get(rid).info["started"] != first  # --retrain trained it again

    # the library call the dashboard's "Re-create this run" makes: held too, each epoch reported as the child ends it
    from workbench.train.recreate import recreate

    seen, said = [], []
    run = recreate(RunStore(tmp_path / "results", readonly=True), RunStore(mine), rid, retrain=True,
                   on_epoch=lambda r, row: seen.append(row["epoch"]), say=said.append)
    assert any("held to it" in line for line in said) and run.info["numerics"]["cpu_capability"] == "DEFAULT"
    assert said[-1] == f"{rid}: every metric of every epoch equals the shipped run's (bit-identical)", said
    assert seen == [row["epoch"] for row in run.metric_rows()] == list(range(1, len(seen) + 1))
    from workbench.store.run import learned

    assert learned(run.metric_rows()) == learned(there.get(rid).metric_rows())  # bit for bit, timings aside


def test_verify_retrains_a_copy_whose_weights_do_not_match_their_hash(tiny, tmp_path):
    """A copy of the shipped folder with `shipped` removed and a 2-byte model.safetensors was "verified" without
    any training; now the recorded weights hash is checked and the copy re-trained."""
    base, rid, env = tiny
    mine = tmp_path / "mine"
    shutil.copytree(base / "results" / rid, mine / rid)
    info = json.loads((mine / rid / "run.json").read_text())
    info.pop("shipped")
    (mine / rid / "run.json").write_text(json.dumps(info))
    (mine / rid / "model.safetensors").write_bytes(b"{}")
    res = CliRunner().invoke(_app(), ["verify", rid, "--shipped", str(base / "results"), "--root", str(mine), "-q"],
                             env=env)
    assert "model.safetensors's sha256 differs" in res.output and "re-training it" in res.output
    assert res.exit_code == 0 and "bit-identical" in res.output and "a re-training just now" in res.output
    assert (mine / rid / "model.safetensors").stat().st_size > 2
    assert RunStore(mine).get(rid).trust_problems() == []


def test_verify_retrains_an_own_copy_whose_metrics_were_edited(tiny, tmp_path):
    base, rid, env = tiny
    mine = tmp_path / "mine"
    args = ["verify", rid, "--shipped", str(base / "results"), "--root", str(mine), "-q"]
    assert CliRunner().invoke(_app(), args, env=env).exit_code == 0
    metrics = mine / rid / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rows[0]["train_loss"] += 0.5
    metrics.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    res = CliRunner().invoke(_app(), args, env=env)
    assert "metrics.jsonl changed after training" in res.output and "re-training it" in res.output
    assert res.exit_code == 0 and "a re-training just now" in res.output
    assert json.loads(metrics.read_text().splitlines()[0])["train_loss"] == rows[0]["train_loss"] - 0.5


# ---- inputs refused, nothing created ---------------------------------------------------------------------------
def test_sweep_and_ship_refuse_an_empty_tier(tmp_path):
    """`--tier ''` (an unset $TIER) trained the whole grid."""
    for args in (["sweep", str(REPO / "grids" / "repro.toml"), "--tier", "", "--dry-run"],
                 ["ship", "--grid", str(REPO / "grids" / "repro.toml"), "--tier", "", "--to", str(tmp_path / "o")]):
        res = CliRunner().invoke(_app(), args + ["--root", str(tmp_path / "runs")])
        assert res.exit_code == 2 and "--tier ''" in res.output, res.output
    assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [["runs"], ["report", "--out", "{tmp}/r.html"]])
def test_a_mistyped_pelab_runs_is_refused_not_created(command, tmp_path):
    typo = tmp_path / "typo"
    res = CliRunner().invoke(_app(), [c.format(tmp=tmp_path) for c in command], env={"PELAB_RUNS": str(typo)})
    assert res.exit_code == 2 and "$PELAB_RUNS" in res.output and "no run store there" in res.output
    assert not typo.exists()


@pytest.mark.parametrize("command", [["analyze", "x", "--all"], ["figure", "x", "convergence", "--out", "{tmp}/f.svg"],
                                     ["app", "--port", "1"]])
def test_commands_that_read_a_store_do_not_create_a_mistyped_root(command, tmp_path):
    typo = tmp_path / "typo"
    res = CliRunner().invoke(_app(), [c.format(tmp=tmp_path) for c in command] + ["--root", str(typo)])
    assert res.exit_code == 2 and "no run store there" in res.output, res.output
    assert not typo.exists()


def test_ship_reads_a_missing_store_as_empty_and_does_not_create_it(tmp_path):
    """Beside a sweep (`make repro`) the store may not exist yet: its runs are not there (waited for with --follow;
    a run named without it is refused), and ship creates neither store."""
    res = CliRunner().invoke(_app(), ["ship", "x", "--to", str(tmp_path / "out"), "--root", str(tmp_path / "typo"),
                                      "--no-analyze"])
    assert res.exit_code == 2 and "no run x in" in res.output, res.output
    res = CliRunner().invoke(_app(), ["ship", "x", "--to", str(tmp_path / "out"), "--root", str(tmp_path / "typo"),
                                      "--no-analyze", "--follow", "1"])
    assert res.exit_code == 0 and "0 shipped, 0 unchanged, 1 skipped" in res.output, res.output
    assert not (tmp_path / "typo").exists() and not (tmp_path / "out").exists()


def test_the_dashboard_does_not_create_its_default_store(tmp_path):
    from apps import common as C
    from apps import create_app

    (tmp_path / "shipped").mkdir()
    app = create_app(tmp_path / "runs", shipped=tmp_path / "shipped", cache_dir=tmp_path / "cache")
    with app.server.test_request_context():
        assert C.stores().query().empty and C.stores().damaged() == {}
    assert not (tmp_path / "runs").exists()


def test_the_resume_command_the_hints_suggest_is_valid(tiny, tmp_path):
    """`workbench train --resume RUN_ID` (suggested by the report and the Runs page) was not valid syntax."""
    from apps.common import run_state_hint

    base, rid, env = tiny
    run = RunStore(base / "runs").get(rid)
    run.update_info(status="interrupted")
    try:
        hint = json.dumps(run_state_hint(run).to_plotly_json(), default=str)
        cmd = f"workbench train --resume {rid}"
        assert cmd in hint
        res = CliRunner().invoke(_app(), cmd.split()[1:] + ["--root", str(base / "runs"), "--dry-run"], env=env)
        assert res.exit_code == 0 and res.output.strip().splitlines()[-1] == rid, res.output
        res = CliRunner().invoke(_app(), ["train", "--resume", "no-such-run", "--root", str(base / "runs")], env=env)
        assert res.exit_code == 2 and "no such run" in res.output
    finally:
        run.update_info(status="finished")


def test_ship_of_a_run_whose_run_json_is_null_fails(tmp_path):
    """It exited 0 saying "skipped"."""
    src = _copy(tmp_path, ROPE_T1)
    rid = ROPE_T1[0]
    shutil.copytree(src / rid, tmp_path / "own" / rid)
    (tmp_path / "own" / rid / "run.json").write_text("null")
    res = CliRunner().invoke(_app(), ["ship", rid, "--root", str(tmp_path / "own"), "--to", str(tmp_path / "out"),
                                      "--no-analyze"])
    assert res.exit_code == 1 and "must hold a JSON object, not NoneType" in res.output and "1 failed" in res.output
    assert not (tmp_path / "out" / rid).exists()


# ---- a dirty tree ships only with its diff ---------------------------------------------------------------------
def test_a_dirty_run_ships_with_its_diff_or_a_stated_reason(tmp_path):
    from workbench.store.ship import is_dirty

    src = _copy(tmp_path, ROPE_T1)
    rid = ROPE_T1[3]
    own = tmp_path / "own"
    shutil.copytree(src / rid, own / rid)
    info = json.loads((own / rid / "run.json").read_text())
    (own / rid / "run.json").write_text(json.dumps(dict(info, code_version="abc1234-dirty")))
    assert is_dirty(RunStore(own).get(rid).info) and not is_dirty(info | {"code_version": "abc1234"})
    args = ["ship", rid, "--root", str(own), "--to", str(tmp_path / "out"), "--no-analyze"]
    res = CliRunner().invoke(_app(), args)
    assert res.exit_code == 1 and "uncommitted changes" in res.output and "--allow-dirty" in res.output
    assert not (tmp_path / "out" / rid).exists()
    res = CliRunner().invoke(_app(), args + ["--allow-dirty", "only a comment changed"])
    assert res.exit_code == 0 and "1 shipped" in res.output, res.output
    shipped = json.loads((tmp_path / "out" / rid / "run.json").read_text())
    assert shipped["dirty_allowed"] == "only a comment changed"
    shutil.rmtree(tmp_path / "out")
    (own / rid / "code.diff").write_text("diff --git a/x b/x\n")
    res = CliRunner().invoke(_app(), args)
    assert res.exit_code == 0 and (tmp_path / "out" / rid / "code.diff").read_text() == "diff --git a/x b/x\n"
    assert "code.diff" in json.loads((tmp_path / "out" / rid / "manifest.json").read_text())["files"]


def test_training_from_a_dirty_tree_records_its_diff(tmp_path, monkeypatch):
    from workbench.store import runstore
    from workbench.train import resolve_config, train

    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234-dirty")
    monkeypatch.setattr(runstore, "code_diff", lambda: "diff --git a/y b/y\n+x\n")
    own = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    sets = [s.replace("train.epochs=2", "train.epochs=1") for s in TINY]
    run = train(resolve_config("smoke", "nope", "trigger-distance", sets=sets, store=own), own, progress=False,
                threads=1)
    assert run.info["code_version"] == "abc1234-dirty"
    assert (run.path / "code.diff").read_text() == "diff --git a/y b/y\n+x\n"
    from workbench.analysis.claims import run_table

    assert run.has_code_diff and run_table(own).set_index("run_id").code_diff[run.id] == True  # noqa: E712
    (run.path / "code.diff").unlink()
    assert not run.has_code_diff and run_table(own).set_index("run_id").code_diff[run.id] == False  # noqa: E712


@pytest.mark.slow
def test_every_callback_answers_a_damaged_run_without_500(tmp_path):
    """Each input and state of every (non-job) callback of every page set, one at a time, to a damaged run's id
    (the others' run pickers on the good run): no HTTP 500, no server path."""
    from apps import create_app

    root = _copy(tmp_path, ROPE_T1)
    files = _damage_three(root)
    (tmp_path / "own").mkdir()
    app = create_app(tmp_path / "own", shipped=root, cache_dir=tmp_path / "cache")
    client = app.server.test_client()
    good, failures, n = ROPE_T1[3], [], 0
    for key, spec in list(app.callback_map.items()):
        if spec.get("background") or "-job-" in key or "callback" not in spec or "_pages_" in key:
            continue  # background jobs run in a child process; clientside and Dash's page routing are not ours
        outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in key.strip(".").split("...")]
        slots = spec["inputs"] + spec["state"]
        for i, rid in ((i, rid) for i in range(len(slots)) for rid in files):
            vals = [good if s["property"] == "value" and "run" in s["id"] else None for s in slots]
            vals[i] = rid
            items = [dict(id=s["id"], property=s["property"], value=x) for s, x in zip(slots, vals)]
            r = client.post("/_dash-update-component", json={
                "output": key, "outputs": outs if key.startswith("..") else outs[0],
                "inputs": items[:len(spec["inputs"])], "state": items[len(spec["inputs"]):],
                "changedPropIds": [f"{slots[i]['id']}.{slots[i]['property']}"]})
            n += 1
            if r.status_code not in (200, 204) or str(tmp_path) in r.get_data(as_text=True):
                failures.append((key[:60], slots[i]["id"], rid, r.status_code))
    assert n > 50 and not failures, failures[:10]


def test_the_report_names_each_damaged_run_and_computes_from_the_rest(tmp_path):
    """The report lists the damaged runs with why (summary.json too) and still writes its findings from the rest."""
    from workbench.report import build_report

    root = _copy(tmp_path, ROPE_T1)
    damaged = _damage_three(root)
    out = tmp_path / "report.html"
    summary = build_report(StoreSet.open(tmp_path / "own", root, create=True), None, out)
    assert set(summary["damaged"]) == set(damaged)
    text = out.read_text()
    for rid, name in damaged.items():
        assert f"{rid} is damaged" in text
    assert f"{ROPE_T1[3]}" in text  # the undamaged run is still reported


def test_the_rerun_rule_reads_every_seed_of_the_setting():
    """The shipped seeds of a setting are the runs whose configs differ only in their seeds: the model's init seed,
    the training seed and the data seed, and the `tag` a grid names its runs with (seeds 42-44 of the ladder's NoPE
    on Task 2 differ in model.seed and train.seed, and seed 42 has no tag: before, each was a setting of its own,
    and a re-run was judged against one seed). Another setting stays apart."""
    from workbench.analysis.reproduce import _setting_key

    ids = ("t2-nope-repro-paperdata-long-s42-e0f3e4", "t2-nope-repro-paperdata-long-s43-7387c0",
           "t2-nope-repro-paperdata-long-s44-1cf581", "t2-rope-repro-paperdata-long-s43-c2cb94")
    keys = [_setting_key(json.loads((REPO / "results" / "repro" / r / "config.json").read_text())) for r in ids]
    assert keys[0] == keys[1] == keys[2] != keys[3]


def test_check_names_an_unshipped_tables_folder_and_a_ship_cut_short(tmp_path):
    """A `tables/` folder dropped into a shipped run would be read before its checked bundle: damage, named; a
    `.RUN.old` left by a re-ship cut between its renames (the run's folder gone) and a `.RUN.shipping` are named
    by `workbench check`, which read 0 runs and "every file matches" before."""
    import pandas as pd

    src = _copy(tmp_path, ROPE_T1[:2])
    rid, other = ROPE_T1[0], ROPE_T1[1]
    assert check_store(src)[0] == {}
    (src / rid / "tables").mkdir()
    pd.DataFrame({"x": [999]}).to_parquet(src / rid / "tables" / "ablation.parquet")
    with pytest.raises(StoreError, match="tables/ was not shipped"):
        RunStore(src, readonly=True).get(rid)
    shutil.rmtree(src / rid / "tables")
    (src / other).rename(src / f".{other}.old")  # cut between the two renames of a re-ship
    bad, _ = check_store(src)
    assert list(bad) == [other] and "is missing: ship the run again, or rename it back" in bad[other][0]
    res = CliRunner().invoke(_app(), ["check", str(src)])
    assert res.exit_code != 0 and other in res.output


def test_bit_identical_means_every_field_of_every_epoch(tiny, tmp_path):
    """`verify` calls a re-run bit-identical only when every metric field but the timings is equal at every epoch
    (`run.learned`, as `ship` reads the same model): a shipped `lr` off in the 12th digit, the four compared losses and
    accuracies equal, reads "within" the tolerance, not "bit-identical" (it read bit-identical, and `--refresh` would
    then have written tables into the shipped store as the same weights')."""
    base, rid, env = tiny
    fake = tmp_path / "fake"
    shutil.copytree(base / "results" / rid, fake / rid)
    rows = [json.loads(line) for line in (fake / rid / "metrics.jsonl").read_text().splitlines()]
    rows[-1]["lr"] = rows[-1]["lr"] * (1 + 1e-12) + 1e-15
    (fake / rid / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(fake / rid)
    res = CliRunner().invoke(_app(), ["verify", rid, "--shipped", str(fake), "--root", str(tmp_path / "mine"), "-q",
                                      "--tables", "none"], env=env)
    assert res.exit_code == 0 and f"{rid}: verified (within 0.0001" in res.output, res.output
    assert "bit-identical" not in res.output


def test_ship_of_a_named_run_in_neither_store_is_refused(tmp_path):
    """`workbench ship ID` with a mistyped id said "0 shipped, 0 unchanged, 1 skipped" and exited 0: without
    --follow a named run neither in --root nor already in --to cannot finish while the command runs, so it exits 2
    naming it and what to change; beside a sweep (--follow) it is still waited for."""
    own, dest = tmp_path / "own", tmp_path / "out"
    RunStore(own)
    res = CliRunner().invoke(_app(), ["ship", "t1-rope-cpu-s42-abcdef", "--root", str(own), "--to", str(dest)])
    assert res.exit_code == 2 and "no run t1-rope-cpu-s42-abcdef in" in res.output and "--root" in res.output
    assert not dest.exists()
    res = CliRunner().invoke(_app(), ["ship", "t1-rope-cpu-s42-abcdef", "--root", str(own), "--to", str(dest),
                                      "--follow", "1"])
    assert res.exit_code == 0 and "skipped" in res.output, res.output
