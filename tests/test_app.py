"""The dashboard, tested as a user would: served on 127.0.0.1, driven by Debian's headless chromium.

A temporary store with smoke-preset runs (tests/browser.py: smoke_store) is built once per process. Browser
tests skip (with the reason) when /usr/bin/chromium or /usr/bin/chromedriver are missing.
"""
from __future__ import annotations

import re
import time

import pytest
import torch

import browser as B

PAGES = [("/", "findings"), ("/runs", "runs"), ("/ablation", "ablation"), ("/heads", "heads"), ("/partial-rope", "partial_rope"), ("/qk-means", "qk_means"),
         ("/angles", "angles"), ("/spectral", "spectral"), ("/distance-bias", "distance_bias"),
         ("/extrapolation", "extrapolation"), ("/explorer", "explorer")]
# what the screenshots show (query parameters pick the runs; the pages also work without them)
SHOT_QUERY = {"ablation": "?run={rope}&run_b={nope}", "heads": "?run={rope}", "qk_means": "?run={rope}", "angles": "?run={rope}",
              "spectral": "?run={rope}", "distance_bias": "?run={rope}|{nope}",
              "extrapolation": "?run={rope}|{nope}|{partial}", "explorer": "?run={rope}&example=3"}


@pytest.fixture(scope="module")
def smoke():
    return B.smoke_store()


@pytest.fixture(scope="module")
def server(smoke):
    """The app on the smoke store; callbacks and background jobs (forked) run torch on one thread."""
    from apps import create_app

    with B.torch_threads(1):
        srv = B.AppServer(create_app(smoke.root, shipped=smoke.shipped).server)
        yield srv
        srv.stop()


@pytest.fixture(scope="module")
def drv():
    reason = B.browser_skip_reason()
    if reason:
        pytest.skip(reason)
    d = B.driver()
    d.get_log("browser")  # drain
    return d


def open_page(drv, url: str, need_traces: bool = True, timeout: float = 40):
    drv.get(url)
    B.wait_until(lambda: drv.find_elements("css selector", ".content h2"), timeout, what=f"{url} to render")
    if need_traces:
        B.wait_until(lambda: any(n > 0 for n in B.trace_counts(drv)), timeout, what=f"a graph with traces on {url}")
    B.wait_until(lambda: B.dash_idle(drv), timeout, what=f"callbacks of {url} to finish")


def page_text(drv) -> str:
    return drv.find_element("css selector", ".content").text


def assert_clean(drv, where: str):
    errors = B.console_errors(drv)
    assert not errors, f"browser console errors on {where}: {errors}"
    text = page_text(drv)
    assert "Traceback" not in text, f"a stack trace is shown on {where}"


# ---- without a browser -----------------------------------------------------------------------------
def test_cli_app_binds_localhost_unless_public(monkeypatch, tmp_path):
    import dash
    from typer.testing import CliRunner

    from workbench.cli import app as cli

    calls = []
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: calls.append(kw))
    quiet_app_cmd(monkeypatch)
    runner = CliRunner()
    (tmp_path / "runs").mkdir()  # `app` serves an existing store, never creates one (issue 43)
    r = runner.invoke(cli, ["app", "--runs", str(tmp_path / "runs"), "--port", "8123"])
    assert r.exit_code == 0, r.output
    r2 = runner.invoke(cli, ["app", "--runs", str(tmp_path / "runs"), "--public"])
    assert r2.exit_code == 0, r2.output
    assert calls[0]["host"] == "127.0.0.1" and calls[0]["port"] == 8123
    assert calls[1]["host"] == "0.0.0.0" and calls[1]["port"] == 8050


def quiet_app_cmd(monkeypatch):
    """`workbench app` without a server: every port free, no warm-up thread over the checkout's results."""
    import apps
    from workbench.cli import app_cmd

    monkeypatch.setattr(app_cmd, "port_in_use", lambda host, port: None)
    monkeypatch.setattr(apps, "start_warm_up", lambda app: None)


def test_the_warm_up_reads_the_run_statuses_then_the_findings_tables(monkeypatch, tmp_path):
    """At start, a thread reads every run's status (the run pickers) and then the Findings page's tables; a store
    that cannot be read does not stop the second."""
    import apps.common as C
    from apps.pages import findings
    from apps import warm_up

    calls = []

    def broken_index(stores):
        calls.append(("index", stores))
        raise OSError("unreadable")

    monkeypatch.setattr(C, "index", broken_index)
    monkeypatch.setattr(findings, "warm", lambda root: calls.append(("findings", root)))
    (tmp_path / "shipped").mkdir()
    ctx = C.AppContext(store_root=tmp_path / "runs", cache_dir=tmp_path / "cache", shipped_root=tmp_path / "shipped")
    warm_up(ctx)
    assert [c[0] for c in calls] == ["index", "findings"] and calls[1][1] == tmp_path / "shipped"
    calls.clear()
    warm_up(C.AppContext(store_root=tmp_path / "runs", cache_dir=tmp_path / "cache"))
    assert [c[0] for c in calls] == ["index"], "no shipped results: no Findings tables to compute"


def test_cli_app_on_a_busy_port_says_so_and_exits_1_before_running(monkeypatch, tmp_path):
    import socket

    import dash
    from typer.testing import CliRunner

    from workbench.cli import app as cli
    from workbench.store import RunStore

    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: pytest.fail("the server must not start"))
    RunStore(tmp_path / "runs")  # `app` serves an existing store only
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = CliRunner().invoke(cli, ["app", "--runs", str(tmp_path / "runs"), "--port", str(port)])
    assert r.exit_code == 1, r.output
    assert f"port {port}" in r.output and "already in use" in r.output and "--port" in r.output
    assert "dashboard on" not in r.output
    # a host that does not resolve is not a port in use
    r = CliRunner().invoke(cli, ["app", "--runs", str(tmp_path / "runs"), "--host", "nosuch.invalid"])
    assert r.exit_code == 2 and "does not resolve" in r.output and "already in use" not in r.output, r.output


def test_every_page_is_routed_and_served(tmp_path):
    from apps import create_app, page_modules

    (tmp_path / "shipped").mkdir()
    app = create_app(tmp_path / "runs", shipped=tmp_path / "shipped")  # hermetic: not the checkout's results
    client = app.server.test_client()
    paths = [m.PATH for m in page_modules()]
    assert sorted(paths) == sorted(p for p, _ in PAGES)
    for path in paths:
        r = client.get(path)
        assert r.status_code == 200 and b"_dash-config" in r.data, path
    layout = client.get("/_dash-layout").get_json()
    assert "pelab-root" not in str(layout) and str(tmp_path) not in str(layout)  # no store path in the page
    r = client.get("/findings")  # the Findings page by its name, not only at /
    assert r.status_code in (301, 302, 307, 308) and r.headers["Location"] in ("/", "http://localhost/"), r.headers
    import dash

    missing = dash.page_registry["not_found_404"]["layout"]()  # what an unknown address shows (not Dash's bare 404)
    links = [c.href for c in missing._traverse() if type(c).__name__ == "Link"]
    assert links == paths and "No page at this address" in str(missing)


@pytest.mark.slow
def test_explorer_ablation_hook_matches_the_stored_sweep(smoke):
    """The explorer's live ablation (hook on hook_z) gives the accuracy the ablation table recorded."""
    from apps.pages.explorer import ablation_hooks
    from workbench.store import RunStore

    run = RunStore(smoke.root).get(smoke.rope)
    if not run.has_table("ablation"):
        pytest.skip("no ablation analysis available")
    table = run.load_table("ablation")
    acc = table[table.metric == "accuracy"]
    model, ds = run.load_model(), run.load_dataset()
    x, y = torch.as_tensor(ds.test_x), torch.as_tensor(ds.test_y)
    for _, row in acc.sort_values("delta").iloc[[0, -1]].iterrows():  # the least and the most important head
        with torch.no_grad():
            out = model.run_with_hooks(x, fwd_hooks=ablation_hooks([(int(row.layer), int(row["head"]))]))
        assert (out.argmax(-1) == y).double().mean().item() == pytest.approx(row.ablated, abs=1e-9)
    with torch.no_grad():  # ablating every head of every layer changes the output
        every = [(l, h) for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
        assert not torch.allclose(model.run_with_hooks(x[:8], fwd_hooks=ablation_hooks(every)), model(x[:8]))


# ---- in the browser ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.browser
def test_every_page_loads_with_data_and_no_console_errors(drv, server, smoke):
    for path, name in PAGES:
        open_page(drv, server.url + path)
        counts = B.trace_counts(drv)
        assert any(n > 0 for n in counts), f"{path}: no graph with traces ({counts})"
        assert_clean(drv, path)
        if name not in SHOT_QUERY:
            B.screenshot(drv, f"dashboard_{name}")
            continue
        path = path + SHOT_QUERY[name].format(**vars(smoke))
        open_page(drv, server.url + path)
        counts = B.trace_counts(drv)
        assert any(n > 0 for n in counts), f"{path}: no graph with traces ({counts})"
        assert_clean(drv, path)
        B.screenshot(drv, f"dashboard_{name}")


@pytest.mark.browser
def test_heads_page_map_card_and_hints(drv, server, smoke):
    open_page(drv, f"{server.url}/heads?run={smoke.rope}&measure=patch_effect")
    B.wait_until(lambda: B.trace_counts(drv, "#heads-card") and B.trace_counts(drv, "#heads-card")[-1] == 2, 40,
                 what="the head card and the head's attention pattern")
    assert B.trace_counts(drv, "#heads-map-graph")[0] == 3  # heatmap + two marker layers
    # patching, attribution, edges, qkv, probes, trigger attention, DLA, self-repair
    assert sum(1 for n in B.trace_counts(drv, "#heads-details") if n > 0) == 8
    text = page_text(drv)
    assert "Layer " in text and "paper's ablation-only" in text
    assert_clean(drv, "heads page")
    unreadable = B.unreadable_text(drv)  # an own run: the attention pattern's tokens, the legends below the axes
    assert not unreadable, "\n".join(unreadable)
    open_page(drv, f"{server.url}/heads?run={smoke.nope}", need_traces=False)
    text = page_text(drv)
    # no head_summary stored: the map joins the run's stored per-head tables, says so, and how to store it
    assert f"{smoke.nope} stores no head_summary table: the map joins its stored per-head tables" in text
    assert f"workbench analyze {smoke.nope} --what head-summary" in text and "Traceback" not in text
    assert_clean(drv, "heads page of a run without the tables")


@pytest.mark.browser
def test_filter_changes_the_training_curves(drv, server, smoke):
    open_page(drv, server.url + "/runs")
    graph = "#runs-curves .js-plotly-plot"

    def names():
        return drv.execute_script(
            "const g = document.querySelector(arguments[0]); "
            "return g ? g.data.filter(t => !(t.meta && t.meta.baseline)).map(t => t.name) : null;", graph)

    before = names()
    assert before and len(before) >= 3, before
    B.select_option(drv, "runs-f-scheme", "nope")
    after = B.wait_until(lambda: (n := names()) != before and n, 20, what="curves to change after the filter")
    assert all("nope" in str(n).lower() for n in after) and len(after) < len(before), (before, after)
    assert smoke.nope in page_text(drv) and smoke.rope not in page_text(drv)
    assert_clean(drv, "runs page after filtering")


@pytest.mark.browser
def test_attention_explorer_live_ablation_changes_the_prediction(drv, server, smoke):
    open_page(drv, f"{server.url}/explorer?run={smoke.rope}&example=3")
    triggers = drv.find_elements("css selector", "#exp-tokens .tok-trigger")
    assert len(triggers) == 2, "Task 1 examples hold exactly two highlighted trigger words"
    clean = drv.find_element("id", "exp-prediction").text
    assert "clean model: predicts" in clean
    for head in ("L0.H0", "L0.H1", "L0.H2", "L0.H3", "L1.H0"):
        B.select_option(drv, "exp-ablate", head, close=False)
    drv.find_element("css selector", "body").send_keys("\ue00c")  # Escape closes the menu
    text = B.wait_until(lambda: "L1.H0 ablated" in (t := drv.find_element("id", "exp-prediction").text) and t,
                        30, what="the prediction with all five heads ablated")
    ablated_line = [line for line in text.splitlines() if "ablated" in line][0]
    assert "L0.H0" in ablated_line and "L1.H0" in ablated_line
    p_clean = float(re.search(r"p\(label\) = ([0-9.]+)", clean).group(1))
    p_abl = float(re.search(r"p\(label\) = ([0-9.]+)", ablated_line).group(1))
    assert p_abl != p_clean
    assert_clean(drv, "explorer")
    B.screenshot(drv, "dashboard_explorer_ablated")


@pytest.mark.browser
def test_missing_table_hint_then_background_job_computes_it(drv, server, smoke):
    from workbench.store import RunStore

    run = RunStore(smoke.root).get(smoke.count)
    assert not run.has_table("spectral")
    open_page(drv, f"{server.url}/spectral?run={smoke.count}", need_traces=False)
    text = page_text(drv)
    assert f"no spectral table yet for {smoke.count}" in text and f"workbench analyze {smoke.count} --what spectral" \
        in text
    drv.find_element("id", "spec-job-run").click()
    B.wait_until(lambda: any(n > 0 for n in B.trace_counts(drv, "#spec-out")), 90, what="the computed figure")
    assert run.has_table("spectral"), "the job's table landed in the store"
    assert "✓" in drv.find_element("id", "spec-job-message").text
    assert not drv.find_element("id", "spec-job-run").get_attribute("disabled")
    assert_clean(drv, "spectral after the job")


@pytest.mark.slow
@pytest.mark.browser
def test_train_job_from_the_app_then_cancel_one(drv, server, smoke):
    from workbench.store import RunStore

    store = RunStore(smoke.root)
    open_page(drv, server.url + "/runs")
    B.select_option(drv, "runs-t-preset", "smoke")
    seed = drv.find_element("id", "runs-t-seed")
    seed.clear()
    seed.send_keys("7")
    drv.find_element("id", "train-job-run").click()
    B.wait_until(lambda: drv.find_element("id", "train-job-box").is_displayed(), 10, what="the progress bar")
    B.wait_until(lambda: "✓ trained" in drv.find_element("id", "train-job-message").text, 120, what="training")
    new = store.query(seed=7, preset="smoke")
    assert len(new) == 1 and new.iloc[0]["status"] == "finished"
    assert new.iloc[0]["id"] in page_text(drv), "the run index refreshed after the job"
    # a longer job, cancelled: the button comes back, nothing finished
    seed.clear()
    seed.send_keys("8")
    B.select_option(drv, "runs-t-preset", "cpu")
    drv.find_element("id", "train-job-run").click()
    B.wait_until(lambda: drv.find_element("id", "train-job-box").is_displayed(), 10, what="the progress bar")
    time.sleep(1.0)
    drv.find_element("id", "train-job-cancel").click()
    B.wait_until(lambda: not drv.find_element("id", "train-job-box").is_displayed(), 20, what="the job to stop")
    # the job's process was killed: its run (if it got as far as creating one) is not live any more
    B.wait_until(lambda: set(store.query(seed=8)["status"]) <= {"interrupted", "created"}, 15,
                 what="the cancelled training process to be gone")
    assert "-s8-" not in drv.find_element("id", "train-job-message").text  # no result came back
    assert not drv.find_element("id", "train-job-run").get_attribute("disabled")
    assert_clean(drv, "runs page after the train jobs")


@pytest.mark.browser
def test_failed_and_unfinished_runs_are_shown_as_such(drv, server, smoke):
    open_page(drv, server.url + "/runs", need_traces=False)
    text = page_text(drv)
    assert f"{smoke.failed} failed: RuntimeError: CUDA out of memory" in text
    assert f"{smoke.created} is created" in text
    open_page(drv, f"{server.url}/ablation?run={smoke.failed}&run_b={smoke.created}", need_traces=False)
    text = page_text(drv)
    assert f"Run {smoke.failed} failed" in text and f"workbench train --resume {smoke.failed}" in text
    assert f"Run {smoke.created} has not been trained yet" in text
    open_page(drv, f"{server.url}/explorer?run={smoke.created}", need_traces=False)
    assert "has not been trained yet" in page_text(drv)
    open_page(drv, f"{server.url}/angles?run={smoke.nope}", need_traces=False)
    assert f"Initial angles does not apply to {smoke.nope}" in page_text(drv)
    assert_clean(drv, "pages of failed / unfinished runs")


@pytest.mark.slow
@pytest.mark.browser
def test_empty_store_shows_hints_not_errors(drv, tmp_path):
    from apps import create_app

    (tmp_path / "shipped").mkdir()
    srv = B.AppServer(create_app(tmp_path / "empty", shipped=tmp_path / "shipped").server)
    try:
        for path, _ in PAGES:
            open_page(drv, srv.url + path, need_traces=False)
            text = page_text(drv)
            assert "No runs" in text and "workbench train" in text, f"{path}: {text[:300]}"
            assert_clean(drv, f"{path} on an empty store")
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.browser
def test_hostile_urls_and_inputs_give_hints_in_the_page(drv, server, smoke):
    """Crafted query parameters (a path as run id, layer -1, unknown heads, a bad example) never reach the store
    as paths and never break the page; the store root is not shown."""
    for url in ("/explorer?run=..%2F..%2Fetc&layer=-1&ablate=99.99&example=abc",
                "/explorer?run=%2Ftmp%2Fx&example=-3", "/qk-means?run=..%2Fx", "/?run=..%2Fx"):
        open_page(drv, server.url + url, need_traces=False)
        assert_clean(drv, url)
    open_page(drv, f"{server.url}/explorer?run={smoke.rope}&ablate=0.1|99.99&layer=1", need_traces=False)
    assert_clean(drv, "explorer with an unknown head")
    open_page(drv, f"{server.url}/no/such-page", need_traces=False)
    text = page_text(drv)
    assert "No page at this address" in text and "Attention explorer" in text and "404 - Page not found" not in text
    assert_clean(drv, "an unknown address")
    assert str(smoke.root) not in drv.page_source


@pytest.mark.browser
def test_recreate_button_brings_a_shipped_run_to_life_in_the_explorer(drv, smoke, tmp_path):
    """A shipped run (no weights) in the explorer: a hint and the Re-create button; the job re-trains it into the
    own store, then the patterns appear and the button is gone."""
    from apps import create_app

    with B.torch_threads(1):
        srv = B.AppServer(create_app(tmp_path / "own", shipped=smoke.shipped).server)
        try:
            open_page(drv, f"{srv.url}/explorer?run={smoke.partial}&example=2", need_traces=False)
            B.wait_until(lambda: drv.find_element("id", "exp-recreate-box").is_displayed(), 20,
                         what="the Re-create panel")
            text = page_text(drv)
            assert "shipped run without weights" in text and f"workbench recreate {smoke.partial}" in text
            assert not B.trace_counts(drv, "#exp-patterns")
            drv.find_element("id", "exp-recreate-job-run").click()
            B.wait_until(lambda: any(n > 0 for n in B.trace_counts(drv, "#exp-patterns")), 120,
                         what="the attention patterns of the re-created run")
            B.wait_until(lambda: not drv.find_element("id", "exp-recreate-box").is_displayed(), 20,
                         what="the Re-create panel to go")
            assert "✓ re-created" in drv.find_element("id", "exp-recreate-job-message").get_attribute("textContent")
            assert "re-created copy" in page_text(drv) and "clean model: predicts" in page_text(drv)
            assert_clean(drv, "explorer after re-creating a shipped run")
        finally:
            srv.stop()


def test_analyses_work_splits_the_progress_bar_and_says_a_run_it_does_not_apply_to(monkeypatch):
    """The per-run loop of the Run buttons (Partial RoPE, the diagnostic pages): each run gets an equal slice of the
    bar, named "[i/n]"; a run whose analysis raises `skip` is said and the loop goes on; any other error stops it."""
    from apps import jobs

    class NotHere(Exception):
        pass

    def fake(progress, ctx, rid, name):
        if rid == "b":
            raise NotHere("no RoPE")
        progress(0.5, f"running {name} on {rid}")
        return {"message": f"{name} for {rid}"}

    monkeypatch.setattr(jobs, "analysis_work", fake)
    seen = []
    out = jobs.analyses_work(lambda f, t: seen.append((f, t)), None, ["a", "b", "c"], "ablation", skip=NotHere)
    assert out == ["ablation for a", "b: not applicable: no RoPE", "ablation for c"]
    assert seen == [(0.5 / 3, "[1/3] running ablation on a"), ((2 + 0.5) / 3, "[3/3] running ablation on c")]
    with pytest.raises(NotHere):
        jobs.analyses_work(lambda f, t: None, None, ["b"], "ablation")
