"""The dashboard does not trust the browser: stores are fixed server-side, run ids are checked against the stores,
bad inputs get hints (HTTP 200, no traceback, no server path), and the job cache is removed on SIGTERM.

Callbacks are driven with direct POSTs to `/_dash-update-component`, as a hostile client would send them."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """An app over a store with one trained smoke run, plus a run-like folder outside the store."""
    from apps import create_app
    from test_validation import train_smoke_run

    tmp = tmp_path_factory.mktemp("site")
    run = train_smoke_run(tmp)
    store = run.store
    outside = tmp / "outside" / "evil"
    outside.mkdir(parents=True)
    (outside / "config.json").write_text((run.path / "config.json").read_text())
    (outside / "model.safetensors").write_bytes((run.path / "model.safetensors").read_bytes())
    app = create_app(store.root, cache_dir=tmp / "cache")
    return app, app.server.test_client(), run, tmp


def callback(app, output_part: str) -> tuple[str, dict]:
    """(output key, callback spec) of the app's callback whose outputs include `output_part`."""
    for key, spec in app.callback_map.items():
        if output_part in key:
            return key, spec
    raise KeyError(output_part)


def post(site, output_part: str, values: dict, extra_state: list | None = None):
    """POST one callback with `values` ({component id: value}; others None); returns (status, text)."""
    app, client = site[0], site[1]
    key, spec = callback(app, output_part)
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in key.strip(".").split("...")]
    ins = [{"id": i["id"], "property": i["property"], "value": values.get(i["id"])} for i in spec["inputs"]]
    state = [{"id": s["id"], "property": s["property"], "value": values.get(s["id"])} for s in spec["state"]]
    payload = {"output": key, "outputs": outs if len(outs) > 1 else outs[0], "inputs": ins,
               "state": state + (extra_state or []), "changedPropIds": [f"{ins[0]['id']}.{ins[0]['property']}"]}
    r = client.post("/_dash-update-component", json=payload)
    return r.status_code, r.get_data(as_text=True)


def assert_safe(text: str, tmp: Path):
    assert "Traceback" not in text and 'File "' not in text
    assert str(tmp) not in text, "a server path reached the browser"


@pytest.mark.parametrize("bad_id", ["../outside/evil", "{tmp}/outside/evil", "..", "a/b", ["x"], {"a": 1}, 5,
                                    "nosuch-run"])
def test_run_ids_from_the_browser_are_checked_against_the_store(site, bad_id):
    app, _, run, tmp = site
    bad = bad_id.format(tmp=tmp) if isinstance(bad_id, str) else bad_id
    status, text = post(site, "exp-hint.children", {"exp-run": bad, "exp-example": 0, "exp-layer": 0})
    assert status == 200, text
    assert "cannot be used" in text or "Unknown run" in text, text
    assert "exp-tokens" in text and '"exp-tokens":{"children":null}' in text.replace(" ", "")  # nothing ran
    assert_safe(text, tmp)
    status, text = post(site, "qk-out.children", {"qk-run": bad})  # a diagnostic page
    assert status == 200 and ("cannot be used" in text or "Unknown run" in text), text
    assert_safe(text, tmp)


@pytest.mark.parametrize("layer,ablate,example", [(-1, [], 0), ("x", [], 0), (99, [], 0), (0, ["L99.H99"], 0),
                                                  (0, ["99.99"], 0), (0, "1.1", 0), (0, [{"a": 1}], 0),
                                                  (0, [], -5), (0, [], "abc"), (0, [], 10**9), (0.5, [], 0)])
def test_bad_explorer_inputs_get_a_hint_not_http_500(site, layer, ablate, example):
    app, _, run, tmp = site
    status, text = post(site, "exp-hint.children", {"exp-run": run.id, "exp-example": example, "exp-layer": layer,
                                                    "exp-ablate": ablate})
    assert status == 200, text
    assert "is not valid" in text or "not a head of this model" in text or "pick heads" in text, text
    assert_safe(text, tmp)


def test_valid_explorer_inputs_still_work(site):
    app, _, run, tmp = site
    status, text = post(site, "exp-hint.children", {"exp-run": run.id, "exp-example": 1, "exp-layer": 1,
                                                    "exp-ablate": ["0.1"]})
    assert status == 200 and "exp-pattern-graph" in text, text


def test_a_store_root_sent_by_the_client_is_never_used(site):
    app, _, run, tmp = site
    target = tmp / "created-by-client"
    for part, values in (("runs-index.children", {}), ("exp-hint.children", {"exp-run": run.id})):
        post(site, part, values, extra_state=[{"id": "pelab-root", "property": "data", "value": str(target)}])
    assert not target.exists()
    layout = site[1].get("/_dash-layout").get_data(as_text=True)
    assert "pelab-root" not in layout and str(tmp) not in layout


def test_runs_table_has_a_source_column_and_lists_shipped_runs(tmp_path):
    from apps import create_app
    from workbench.store import RunStore
    from test_store import make_config

    own, shipped = RunStore(tmp_path / "own"), RunStore(tmp_path / "shipped")
    a, b = own.create(make_config("rope")), shipped.create(make_config("nope"))
    bad = own.create(make_config("alibi"))
    (bad.path / "run.json").write_text("[1, 2]")  # corrupt: its error names the file by its full path
    app = create_app(own.root, cache_dir=tmp_path / "cache", shipped=shipped.root)
    status, text = post((app, app.server.test_client()), "runs-index.children", {})
    assert status == 200, text
    rows = {r["id"]: r for r in _table_rows(text)}
    assert rows[a.id]["source"] == "own" and rows[b.id]["source"] == "shipped"
    assert rows[bad.id]["status"] == "corrupt" and "run.json" in rows[bad.id]["error"]
    assert str(tmp_path) not in text  # the error is shown without the server path
    assert not (shipped.root / ".locks").exists()


def _table_rows(text: str) -> list[dict]:
    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "DataTable":
                yield from node["props"]["data"]
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    return list(walk(json.loads(text)))


def test_job_work_resolves_ids_only_inside_the_stores(site):
    from apps.jobs import analysis_work
    from workbench.store import StoreError

    app, _, run, tmp = site
    ctx = app.server.config["PELAB"]
    for bad in ("../outside/evil", str(tmp / "outside" / "evil")):
        with pytest.raises(StoreError, match="unknown run"):
            analysis_work(lambda f, t: None, ctx, bad, "qk_means")
    assert not (tmp / "outside" / "evil" / "tables").exists()


def test_a_failing_figure_shows_no_traceback_or_path(monkeypatch):
    from apps import common as C

    def broken(df, **kw):
        raise ValueError(f"bad column in {REPO}/workbench/figures/x.py")

    monkeypatch.setattr(C, "figures", lambda: {"broken": broken})
    fig, err = C.build_figure("broken", None)
    text = json.dumps(err.to_plotly_json(), default=lambda o: o.to_plotly_json())
    assert fig is None and "x.py" in text and str(REPO) not in text and "Traceback" not in text
    assert "Details" not in text


def test_sigterm_removes_the_job_cache_folder(tmp_path):
    code = ("import sys, time; from apps import create_app; import apps.common as C\n"
            f"app = create_app({str(tmp_path / 'runs')!r})\n"
            "print(app.server.config['PELAB'].cache_dir, flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    cache = Path(p.stdout.readline().strip())
    assert cache.name.startswith("pelab-dash-") and cache.is_dir()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    assert not cache.exists()


@pytest.mark.slow
def test_every_callback_answers_hostile_values_without_500_traces_or_paths(site):
    """Each input and state of every (non-job) callback, one at a time, set to a hostile value."""
    app, client, run, tmp = site
    hostile = ["../outside/evil", -1, {"a": 1}, ["../x", 5], True]
    failures, n = [], 0
    for key, spec in list(app.callback_map.items()):
        if spec.get("background") or "-job-" in key or "callback" not in spec or "_pages_" in key:
            continue  # jobs run in a child process (their work functions are tested above); clientside and
            # Dash's own page routing are not ours
        outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in key.strip(".").split("...")]
        slots = spec["inputs"] + spec["state"]
        for i, v in ((i, v) for i in range(len(slots)) for v in hostile):
            vals = [run.id if s["id"].endswith(("-run", "-run-a")) else None for s in slots]
            vals[i] = v
            items = [dict(id=s["id"], property=s["property"], value=x) for s, x in zip(slots, vals)]
            payload = {"output": key, "outputs": outs if len(outs) > 1 else outs[0],
                       "inputs": items[:len(spec["inputs"])], "state": items[len(spec["inputs"]):],
                       "changedPropIds": [f"{slots[0]['id']}.{slots[0]['property']}"]}
            r = client.post("/_dash-update-component", json=payload)
            n += 1
            text = r.get_data(as_text=True)
            if r.status_code not in (200, 204) or "Traceback" in text or str(tmp) in text:
                failures.append((key[:50], slots[i]["id"], v, r.status_code))
    assert n > 100 and not failures, failures[:10]


def test_page_layouts_take_any_query_text(site):
    """A page URL's query (`/heads?example=abc`, `/explorer?example=²`) never fails a layout (Dash hands the query
    to it as text): a whole number where the text is ASCII digits (`common.url_int`), else the default."""
    import inspect

    from apps import page_modules
    from apps.common import url_int

    assert (url_int("12"), url_int("²"), url_int("-1"), url_int("abc", 3), url_int(None)) == (12, 0, 0, 3, 0)
    app = site[0]
    with app.server.test_request_context("/"):
        for m in page_modules():
            params = [p for p, v in inspect.signature(m.layout).parameters.items() if v.kind == v.KEYWORD_ONLY
                      or (v.kind == v.POSITIONAL_OR_KEYWORD and v.default is not inspect.Parameter.empty)]
            for value in ("abc", "²", "-1", "../x"):
                m.layout(**{p: value for p in params})  # raises on the text it cannot read


def test_an_alias_keeps_the_query_and_a_hostile_metric_gets_a_hint(site):
    """/findings?claim=5 redirects to /?claim=5 (the query kept); the Ablation page's metric from the browser is one
    of accuracy / loss, else a hint (a list was a TypeError, HTTP 500), and its ablation mode one of zero / mean /
    resample."""
    from apps.pages import ablation

    app, client, run, _ = site
    r = client.get("/findings?claim=5")
    assert r.status_code == 302 and r.headers["Location"].endswith("/?claim=5")
    with app.server.test_request_context("/"):
        from apps import common as C

        for bad in (["x"], {"a": 1}, "nosuch"):
            out = ablation.render(C.stores(), run.id, bad, "zero")
            assert "is unknown: pick accuracy or loss" in str(out)
        for bad in (["x"], "foo"):  # `/ablation?mode=foo` named a `--mode foo` the CLI refuses
            out = str(ablation.render(C.stores(), run.id, "accuracy", bad))
            assert "is unknown: pick zero, mean or resample" in out and "--mode" not in out
        assert "foo" not in str(ablation.layout(mode="foo"))  # the dropdown on zero, not on a value it lacks


def test_dashboard_jobs_are_bounded_and_the_train_panel_trains_small_presets(site, tmp_path):
    """At most MAX_JOBS jobs hold a slot at once (a flock each, any tab or request; the next press is refused with a
    line), the Train panel trains only TRAIN_PRESETS (a long preset is refused naming the CLI command), and every
    job panel's callback carries its own button's id, so two panels' presses never share a cached result."""
    from types import SimpleNamespace

    from apps.jobs import MAX_JOBS, TRAIN_PRESETS, job_slot, train_work

    ctx = SimpleNamespace(cache_dir=tmp_path)
    with job_slot(ctx) as a, job_slot(ctx) as b:
        assert MAX_JOBS == 2 and {a, b} == {0, 1}
        with pytest.raises(ValueError, match="2 jobs are running on this dashboard already"):
            with job_slot(ctx):
                pass
    with job_slot(ctx) as again:  # released when a job ends
        assert again == 0
    app = site[0]
    with pytest.raises(ValueError, match=r"run `workbench train --preset repro-paperdata-long` instead"):
        train_work(lambda f, t: None, app.server.config["PELAB"], "rope", "trigger-distance", "repro-paperdata-long")
    # what a made-up request may send: a clear line each, never a raw TypeError or a command that cannot work
    for args, words in (((["rope"], "trigger-distance", "smoke"), "pick one scheme from the list"),
                        (("rope", "trigger-distance", "../../x"), "unknown preset '../../x'")):
        with pytest.raises(ValueError, match=re.escape(words)):
            train_work(lambda f, t: None, app.server.config["PELAB"], *args)
    assert set(TRAIN_PRESETS) == {"cpu", "smoke"}
    jobs = [(k, s) for k, s in app.callback_map.items() if s.get("background")]
    assert jobs
    for key, spec in jobs:
        prefix = key.split("-job-result")[0].lstrip(".")
        assert {"id": f"{prefix}-job-run", "property": "id"} in spec["state"], key


def test_debug_mode_is_refused_off_this_machine():
    """`workbench app --debug` shows tracebacks (with server paths) to every browser: refused with --public or a
    non-local --host, before anything is served."""
    from typer.testing import CliRunner

    from workbench.cli import app as cli

    for args in (["--public"], ["--host", "10.0.0.5"]):
        r = CliRunner().invoke(cli, ["app", "--debug", *args])
        assert r.exit_code == 2 and "--debug shows tracebacks" in r.output, r.output


def test_the_runs_page_tick_rebuilds_only_when_a_store_changed(site):
    """The Runs page's 20-s tick answers 204 (nothing sent: the table keeps its sort and page, the curves their
    zoom) while the stores' contents stamp is the one the page last drew; a changed store redraws it."""
    app, client, run, _ = site
    key, spec = callback(app, "runs-stamp.data")
    outs = [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in key.strip(".").split("...")]

    def tick(seen):
        state = [{"id": s["id"], "property": s["property"], "value": seen if s["id"] == "runs-stamp" else None}
                 for s in spec["state"]]
        ins = [{"id": i["id"], "property": i["property"], "value": 1 if i["id"] == "runs-tick" else None}
               for i in spec["inputs"]]
        return client.post("/_dash-update-component", json={
            "output": key, "outputs": outs, "inputs": ins, "state": state, "changedPropIds": ["runs-tick.n_intervals"]})

    first = tick(None)
    assert first.status_code == 200
    stamp = json.loads(first.get_data(as_text=True))["response"]["runs-stamp"]["data"]
    assert tick(stamp).status_code == 204
    run.update_info(note="changed")  # run.json rewritten: the stamp moves
    assert tick(stamp).status_code == 200


def test_a_diagnostic_job_over_several_runs_leaves_the_shipped_ones_out(site):
    """The Extrapolation page's Run over a shipped run and a run of your own: the own run is analysed, the shipped
    one left out and said (the job stopped at the shipped run with "read-only", never reaching yours); only shipped
    runs picked: a line that says their tables cannot be added here."""
    from types import SimpleNamespace

    from apps.pages import _diagnostic, extrapolation
    from workbench.store import RunStore, StoreSet

    _, _, run, _ = site
    shipped = REPO / "results" / "repro"
    sid = "t1-rope-repro-s42-e451f6"
    if not (shipped / sid).is_dir():
        pytest.skip("no shipped results in this checkout")
    ctx = SimpleNamespace(stores=lambda: StoreSet(RunStore(run.store.root), RunStore(shipped, readonly=True)))
    out = _diagnostic.run_missing(extrapolation.SPEC, lambda f, t: None, ctx, [sid, run.id])
    assert out["run_id"] == run.id and "left out 1 shipped run(s)" in out["message"]
    with pytest.raises(ValueError, match="the picked runs are shipped runs"):
        _diagnostic.run_missing(extrapolation.SPEC, lambda f, t: None, ctx, [sid])
    for bad in ("nosuchrun", "../../etc", ["x"]):  # a made-up id is unknown, not a shipped run
        with pytest.raises(ValueError, match="unknown run .*pick a run from the list"):
            _diagnostic.run_missing(extrapolation.SPEC, lambda f, t: None, ctx, [bad, run.id])


def test_a_missing_table_hint_names_the_pages_own_button(site):
    """The hint under a missing table names the button of the page that computes it: "Compute" on the Heads page,
    "Run" elsewhere (the Heads page said "press Run", a button it does not have)."""
    import inspect

    from apps import common as C
    from apps.pages import heads

    _, _, run, _ = site
    assert "or press Compute." in str(C.load_table(run, "nosuch_table", button="Compute")[1])
    assert "or press Run." in str(C.load_table(run, "nosuch_table")[1])
    assert 'C.load_table(run, "head_summary", button="Compute")' in inspect.getsource(heads.summary_of)


def test_the_heads_card_draws_a_heads_attention_with_the_explorers_helpers(site):
    """The Heads page's attention block uses the explorer's public example helpers (`pick_example`, `example_batch`;
    it imported their private names): a pattern for a head of the run, an example past the test split clamped."""
    from apps.pages import heads

    app, _, run, _ = site
    with app.server.test_request_context("/"):
        out = heads.attention_block(run, 0, 0, 10 ** 6)
    text = str(out)
    assert "Cannot load" not in text and "Graph" in text, text[:300]


def test_a_script_path_outside_what_dash_serves_is_not_found_without_a_traceback(site, capfd):
    """Paths under /_dash-component-suites/ that leave a library's files (`..`, encoded or not), or name a library
    that is not registered, answer 404 (Dash raised its DependencyException: HTTP 500 and a traceback in the
    server's log); the app's own scripts are still served."""
    app, client, run, tmp = site
    page = client.get("/").get_data(as_text=True)
    script = re.search(r'src="(/_dash-component-suites/dash/[^"]+\.js[^"]*)"', page).group(1)
    assert client.get(script).status_code == 200
    capfd.readouterr()
    for url in ("/_dash-component-suites/../../etc/passwd", "/_dash-component-suites/dash/..%2F..%2F..%2Fetc%2Fpasswd",
                "/_dash-component-suites/dash/../../../etc/passwd", "/_dash-component-suites/nosuchpkg/x.js",
                "/_dash-component-suites/dash/deps/..%2F..%2F__init__.py"):
        r = client.get(url)
        assert r.status_code == 404, url
        assert_safe(r.get_data(as_text=True), tmp)
        assert "root:" not in r.get_data(as_text=True) and "import" not in r.get_data(as_text=True)
    assert "Traceback" not in "".join(capfd.readouterr())
