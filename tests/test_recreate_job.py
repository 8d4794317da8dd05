"""The dashboard's "Re-create this run" job and the Runs page's fidelity selector, without a browser.

A shipped run (tests/browser.py: smoke_store ships its smoke runs without weights) is re-trained into an empty
own store by `apps.jobs.recreate_work`, the work of the background job; the panel's visibility callback is driven
with POSTs to `/_dash-update-component` as the browser sends them.
"""
from __future__ import annotations

import json
import re

import pytest

import browser as B


@pytest.fixture(scope="module")
def smoke():
    return B.smoke_store()


@pytest.fixture(scope="module")
def app_on_shipped(smoke, tmp_path_factory):
    """An app whose own store is empty and whose shipped store is the smoke store's shipped copy."""
    from apps import create_app

    tmp = tmp_path_factory.mktemp("recreate")
    app = create_app(tmp / "runs", shipped=smoke.shipped, cache_dir=tmp / "cache")
    return app, app.server.test_client(), tmp


def panel(app, client, prefix: str, value, **extra) -> dict:
    """The outputs of the recreate panel's visibility callback for the run dropdown value `value` (and the values
    of other dropdowns it reads, by id)."""
    key = next(k for k in app.callback_map if f"{prefix}-recreate-box.style" in k)
    spec = app.callback_map[key]
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in key.strip(".").split("...")]
    ins = [{"id": i["id"], "property": i["property"],
            "value": extra.get(i["id"], value) if i["property"] == "value" else None} for i in spec["inputs"]]
    r = client.post("/_dash-update-component", json={"output": key, "outputs": outs, "inputs": ins, "state": [],
                                                      "changedPropIds": [f"{ins[0]['id']}.value"]})
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    resp = r.get_json()["response"]
    return {cid: props for cid, props in resp.items()}


def shown(out: dict, prefix: str) -> bool:
    return out[f"{prefix}-recreate-box"]["style"]["display"] == "block"


def test_unknown_or_foreign_ids_are_refused(app_on_shipped, smoke):
    from apps.jobs import recreate_work
    from workbench.store import StoreError

    app, _, tmp = app_on_shipped
    ctx = app.server.config["PELAB"]
    for bad in ("../shipped/" + smoke.rope, str(smoke.shipped / smoke.rope), "..", "t1-rope-smoke-s42-ffffff",
                smoke.failed):  # a path, a well-formed id that is not shipped, an own-store-only id of another store
        with pytest.raises(StoreError, match="no such run|invalid run id|not a valid|run id"):
            recreate_work(lambda f, t: None, ctx, bad)
    for bad in (None, "", ["x"], {"a": 1}, 5):
        with pytest.raises(ValueError, match="pick a shipped run"):
            recreate_work(lambda f, t: None, ctx, bad)
    assert ctx.stores().own.run_ids() == [], "nothing was written to the own store"


def test_button_then_job_then_the_page_uses_the_bit_identical_copy(app_on_shipped, smoke):
    from apps import common as C
    from apps.jobs import recreate_work
    from workbench.store import RunStore

    app, client, _ = app_on_shipped
    ctx = app.server.config["PELAB"]
    rid = smoke.rope
    shipped_run = RunStore(smoke.shipped, readonly=True).get(rid)
    assert not shipped_run.has_weights
    for prefix, value in (("exp", rid), ("heads", rid)):
        out = panel(app, client, prefix, value)
        assert shown(out, prefix) and out[f"{prefix}-recreate-target"]["data"] == rid
        assert f"workbench recreate {rid}" in json.dumps(out[f"{prefix}-recreate-note"])
    # the heads card of the shipped run says why it has no attention pattern
    with app.server.test_request_context():
        from apps.pages.heads import render_card

        card = json.dumps([c.to_plotly_json() for c in render_card(C.stores(), rid, None, 0)], default=str)
    assert "shipped run without weights" in card
    # its measures at the house precision (`style.shown`: 3 decimals, 3 significant digits below 0.01), though
    # shipped tables are float32 (np.float32 is not a float: 0.1 must not read 0.10000000149011612)
    assert "head_summary" in shipped_run.tables() and '"value": "0.' in card
    for v in re.findall(r'"value": "(-?\d+\.\d+)"', card):
        digits = v.split(".")[1]
        assert len(digits) <= 3 or (abs(float(v)) < 0.01 and len(digits.lstrip("0")) <= 3), v

    seen = []
    with B.torch_threads(1):
        result = recreate_work(lambda f, t: seen.append((f, t)), ctx, rid)
    own = ctx.stores().own.get(rid)
    assert result["run_id"] == rid and own.status == "finished" and own.has_weights
    epochs = int(own.config["train"]["epochs"])
    assert any(f"epoch {epochs}/{epochs} done, test acc" in t for _, t in seen) and seen[-1][0] == 1.0
    keys = ("epoch", "step", "lr", "train_loss", "train_acc", "test_loss", "test_acc")  # not the timings
    assert [{k: r[k] for k in keys} for r in own.metric_rows()] == \
        [{k: r[k] for k in keys} for r in shipped_run.metric_rows()], "the re-created run's metrics are bit-identical"
    assert sorted(own.tables()) == sorted(shipped_run.tables()), "the shipped tables came along"
    assert result["message"].endswith(f"s. Every metric of every epoch equals the shipped run's (bit-identical); "
                                      f"{len(own.tables())} shipped analysis tables copied to it"), result["message"]
    # the page reads the own copy now (own store first) and the button is gone
    assert ctx.stores().store_of(rid)[0] == "own"
    out = panel(app, client, "exp", rid)
    assert not shown(out, "exp") and out["exp-recreate-target"]["data"] is None
    assert "re-created copy" in json.dumps(out["exp-recreate-done"])
    with pytest.raises(ValueError, match="already in your store"):
        recreate_work(lambda f, t: None, ctx, rid)


def test_a_second_job_on_a_run_being_recreated_is_refused(app_on_shipped, smoke):
    from apps.jobs import recreate_work
    from workbench.store import RunLocked

    app, _, _ = app_on_shipped
    ctx = app.server.config["PELAB"]
    own = ctx.stores().own
    lock = own.lock(smoke.nope).acquire()  # what a running re-creation job holds
    try:
        with pytest.raises(RunLocked, match="is being trained by pid"):
            recreate_work(lambda f, t: None, ctx, smoke.nope)
        out = panel(app, app.server.test_client(), "exp", smoke.nope)  # a reloaded page says it is running
        assert shown(out, "exp") and "being re-created in your store right now" in json.dumps(out["exp-recreate-note"])
    finally:
        lock.release()
    assert smoke.nope not in own.run_ids()


def test_button_hidden_for_runs_with_weights_and_for_own_runs(smoke, tmp_path):
    from apps import create_app

    app = create_app(smoke.root, shipped=smoke.shipped, cache_dir=tmp_path / "cache")  # every shipped run is
    client = app.server.test_client()                                                 # also an own run here
    for value in (smoke.rope, smoke.count, [smoke.rope, smoke.nope], smoke.created, None, "../x", {"a": 1}):
        out = panel(app, client, "exp", value)
        assert not shown(out, "exp"), value
    app2 = create_app(tmp_path / "empty", shipped=smoke.shipped, cache_dir=tmp_path / "cache2")
    out = panel(app2, app2.server.test_client(), "heads", ["../x", smoke.nope])  # the first run that needs it
    assert shown(out, "heads") and out["heads-recreate-target"]["data"] == smoke.nope


def test_table_pages_offer_it_only_for_a_table_the_shipped_run_lacks(smoke, tmp_path):
    """Ablation and the diagnostic pages need the weights only to compute a missing table."""
    from apps import create_app

    app = create_app(tmp_path / "empty", shipped=smoke.shipped, cache_dir=tmp_path / "cache")
    client = app.server.test_client()
    assert not shown(panel(app, client, "spec", smoke.rope), "spec")  # its spectral table is shipped
    out = panel(app, client, "spec", smoke.count)  # shipped without a spectral table
    assert shown(out, "spec") and out["spec-recreate-target"]["data"] == smoke.count
    assert not shown(panel(app, client, "ang", smoke.nope), "ang")  # initial angles do not apply to NoPE
    assert not shown(panel(app, client, "abl-a", smoke.rope, **{"abl-mode": "zero"}), "abl-a")
    assert shown(panel(app, client, "abl-a", smoke.rope, **{"abl-mode": "mean"}), "abl-a")  # not stored
    assert not shown(panel(app, client, "abl-b", smoke.rope, **{"abl-mode": {"a": 1}}), "abl-b")
    from apps import common as C
    from apps.pages._diagnostic import render
    from apps.pages.spectral import SPEC

    with app.server.test_request_context():  # the missing-table hint does not promise a Run the job would refuse
        text = json.dumps([c.to_plotly_json() for c in render(SPEC, C.stores(), [smoke.count])], default=str)
    assert f"no spectral table for the shipped run {smoke.count}: re-create it in your store first" in text


def test_tables_are_copied_only_when_the_metrics_agree(smoke, tmp_path):
    """A copy whose metrics differ from the shipped ones (here: a doctored shipped metrics.jsonl) is not the model
    the shipped tables describe: it gets none of them."""
    import shutil

    from workbench.store import RunStore
    from workbench.train.recreate import recreate

    fake = tmp_path / "shipped"
    shutil.copytree(smoke.shipped / smoke.count, fake / smoke.count)
    rows = [json.loads(line) for line in (fake / smoke.count / "metrics.jsonl").read_text().splitlines()]
    rows[-1]["test_loss"] += 1e-3
    (fake / smoke.count / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    from workbench.store.manifest import write_manifest

    write_manifest(fake / smoke.count)  # doctored with its manifest, so the shipped store reads it
    said = []
    with B.torch_threads(1):
        run = recreate(RunStore(fake, readonly=True), RunStore(tmp_path / "own"), smoke.count, say=said.append)
    assert run.status == "finished" and run.has_weights and run.tables() == []
    assert said[-1].startswith(f"{smoke.count}: the re-training's metrics differ from the shipped run's (largest "
                               "|difference| 0.001 in test_loss; tolerance 0.0001)"), said
    assert "no shipped table is copied" in said[-1] and f"workbench verify {smoke.count}" in said[-1]
    assert RunStore(fake, readonly=True).get(smoke.count).tables(), "the shipped run had tables to copy"


# ---- the Runs page's fidelity selector -------------------------------------------------------------------
def test_train_job_passes_the_fidelity(tmp_path):
    from apps.common import AppContext
    from apps.jobs import train_work

    ctx = AppContext(store_root=tmp_path / "runs", cache_dir=tmp_path / "cache")
    with B.torch_threads(1):
        out = train_work(lambda f, t: None, ctx, "rope", "trigger-distance", "smoke", 3, "paper", "authors")
    run = ctx.stores().own.get(out["run_id"])
    assert run.status == "finished" and run.config["fidelity"] == "authors"
    assert run.config["model"]["attn_pad_mask"] is False and run.config["model"]["scheme"] == "rope+sinusoidal"
    for bad in ("paper", "../x", ["authors"], 5):
        with pytest.raises(ValueError, match="fidelity .* is unknown"):
            train_work(lambda f, t: None, ctx, "rope", "trigger-distance", "smoke", 3, "paper", bad)
    with pytest.raises(ValueError, match="runs arch='encoder'"):
        train_work(lambda f, t: None, ctx, "mla", "trigger-distance", "smoke", 3, "paper", "authors-mla")
    assert ctx.stores().own.run_ids() == [out["run_id"]]


def test_fidelity_choice_sets_the_form_and_reaches_the_job(tmp_path):
    from apps import create_app
    from apps.pages.runs import fidelity_choices

    assert fidelity_choices("authors-mla", "paper", "rope") == ("encoder", "mla")
    assert fidelity_choices("authors", "encoder", "alibi") == ("paper", "alibi")
    assert fidelity_choices("pelab", "decoder", "nope") == ("decoder", "nope")
    assert fidelity_choices({"a": 1}, "decoder", "nope") == ("decoder", "nope")
    app = create_app(tmp_path / "runs", shipped=tmp_path, cache_dir=tmp_path / "cache")
    job = next(spec for key, spec in app.callback_map.items() if "train-job-result" in key)
    assert {"id": "runs-t-fidelity", "property": "value"} in job["state"]
    from apps.pages import runs

    with app.server.test_request_context():
        form = json.dumps(runs._train_controls().to_plotly_json(), default=lambda o: o.to_plotly_json())
    assert '"runs-t-fidelity"' in form and '"authors-mla"' in form and '"value": "pelab"' in form


def test_index_of_an_empty_own_store_and_shipped_runs_stays_numeric(smoke, tmp_path):
    """Concatenating an empty own index made every column `object`, so the Runs table showed unrounded
    accuracies (house precision applies to numeric columns)."""
    from workbench.store import StoreSet

    df = StoreSet.open(tmp_path / "own", smoke.shipped).query()
    assert len(df) and set(df["source"]) == {"shipped"}
    assert df["test_acc"].dtype.kind == "f" and df["epoch"].dtype.kind == "i"


def test_a_run_from_other_numerics_is_recreated_with_the_note_that_says_so(smoke, tmp_path):
    """A shipped run whose recorded numerics differ from this machine's (here: another torch build) re-trains on
    another trajectory; the job's result says so, as `workbench recreate` does, rather than leaving the reader to
    wonder why the copy's metrics and tables differ from the shipped ones."""
    import shutil

    from apps import create_app
    from apps.jobs import recreate_work
    from workbench.store.manifest import write_manifest

    shipped = tmp_path / "shipped"
    shutil.copytree(smoke.shipped / smoke.count, shipped / smoke.count)
    info_path = shipped / smoke.count / "run.json"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps(info | {"numerics": info["numerics"] | {"torch": "0.0-other"}}))
    write_manifest(shipped / smoke.count)
    app = create_app(tmp_path / "runs", shipped=shipped, cache_dir=tmp_path / "cache")
    with B.torch_threads(1):
        result = recreate_work(lambda f, t: None, app.server.config["PELAB"], smoke.count)
    assert result["run_id"] == smoke.count and "Note: this machine's numerics differ" in result["message"]
    assert "torch 0.0-other there" in result["message"]
    # then how the finished copy compares: here the same floats (only the recorded torch string was changed)
    assert "Every metric of every epoch equals the shipped run's (bit-identical)" in result["message"]


def test_a_run_trained_on_a_gpu_is_not_offered_for_re_creation_on_a_machine_without_one(tmp_path):
    """A paper-scale run of results/paper (run.json: device cuda, NVIDIA H200): `recreate` refuses it before it
    writes anything (it trained with --device cuda; on 2 CPU cores it would take days), no Re-create button shows,
    and the pages' hints say why and where it can be re-created instead of offering a job that would fail."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the run can be re-created here")
    from pathlib import Path

    from apps import create_app
    from apps import common as C
    from apps.pages._diagnostic import render
    from apps.pages.spectral import SPEC
    from workbench.store import RunStore, StoreError
    from workbench.train.recreate import recreate

    paper = Path(__file__).resolve().parents[1] / "results" / "paper"
    rid = "t1-rope-paper-s42-82c372"
    assert RunStore(paper, readonly=True).get(rid).info["device"] == "cuda"
    own = RunStore(tmp_path / "own")
    with pytest.raises(StoreError, match=r"trained on a GPU \(.*\) and is re-trained only on one"):
        recreate(RunStore(paper, readonly=True), own, rid)
    assert not own.exists(rid) and not (own.root / rid).exists(), "nothing written before the refusal"
    app = create_app(tmp_path / "empty", shipped=paper, cache_dir=tmp_path / "cache")
    client = app.server.test_client()
    assert not shown(panel(app, client, "spec", rid), "spec") and not shown(panel(app, client, "exp", rid), "exp")
    with app.server.test_request_context():
        text = json.dumps([c.to_plotly_json() for c in render(SPEC, C.stores(), [rid])], default=str)
        live = str(C.no_weights_hint(C.stores().get(rid)))
    assert f"no spectral table for the shipped run {rid}, and no weights to compute it" in text
    assert "re-create it in your store first" not in text and "trained on a GPU" in text
    assert "nothing can run live here" in live and f"workbench recreate {rid}" in live
    from apps.jobs import analysis_work

    with pytest.raises(ValueError, match=r"trained on a GPU .* on a machine with a CUDA GPU"):  # a Compute press
        analysis_work(lambda *a: None, app.server.config["PELAB"], rid, "spectral")


def test_the_heads_page_offers_compute_only_for_a_run_of_your_own_store(smoke, tmp_path):
    """A shipped run's tables cannot be added (`analysis_work` refuses): the Heads page hides its Compute panel for
    one, and shows it for an own run (a re-created copy included, as the own store is read first)."""
    from apps import create_app

    app = create_app(tmp_path / "empty", shipped=smoke.shipped, cache_dir=tmp_path / "cache")
    client = app.server.test_client()
    key = next(k for k in app.callback_map if "heads-compute.style" in k)
    spec = app.callback_map[key]
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in key.strip(".").split("...")]

    def compute_style(store_app, store_client, run_id):
        ins = [{"id": i["id"], "property": i["property"],
                "value": run_id if i["id"] == "heads-run" else ("n_agree" if i["id"] == "heads-measure" else None)}
               for i in spec["inputs"]]
        r = store_client.post("/_dash-update-component", json={"output": key, "outputs": outs, "inputs": ins,
                                                                "state": [], "changedPropIds": ["heads-run.value"]})
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
        return r.get_json()["response"]["heads-compute"]["style"]["display"]

    assert compute_style(app, client, smoke.rope) == "none"  # shipped, not in the own store
    assert compute_style(app, client, "../etc") == "none"
    own = create_app(smoke.root, shipped=smoke.shipped, cache_dir=tmp_path / "cache2")  # the runs are own runs here
    assert compute_style(own, own.server.test_client(), smoke.rope) == "block"


@pytest.mark.parametrize("panel,dropdown", [("abl-a-job-panel", "abl-run-a"), ("spec-job-panel", "spec-run"),
                                            ("extr-job-panel", "extr-run")])
def test_the_run_buttons_show_only_for_a_run_of_your_own_store(smoke, tmp_path, panel, dropdown):
    """The Ablation atlas's and the diagnostic pages' Run button (`register_job(runs_from=...)`) hides for a shipped
    run, whose press `analysis_work` could only refuse, and for an unknown id; it shows for an own run."""
    from apps import create_app

    def style(app, run_id):
        key = f"{panel}.style"
        spec = app.callback_map[key]
        ins = [{"id": i["id"], "property": i["property"], "value": run_id if i["id"] == dropdown else None}
               for i in spec["inputs"]]
        r = app.server.test_client().post("/_dash-update-component", json={
            "output": key, "outputs": {"id": panel, "property": "style"}, "inputs": ins, "state": [],
            "changedPropIds": [f"{dropdown}.value"]})
        assert r.status_code == 200, r.get_data(as_text=True)[:300]
        return r.get_json()["response"][panel]["style"]

    shipped = create_app(tmp_path / "empty", shipped=smoke.shipped, cache_dir=tmp_path / "cache")
    for bad in (smoke.rope, "../etc", -1, True, {"a": 1}):  # shipped, hostile, not an id: no button, no error
        assert style(shipped, bad) == {"display": "none"}
    own = create_app(smoke.root, shipped=smoke.shipped, cache_dir=tmp_path / "cache2")
    assert style(own, smoke.rope) == {}
