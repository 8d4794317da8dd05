"""Helpers for the user-level tests (dashboard, report, notebooks); no pytest fixtures live here.

* `smoke_store()`: a temporary run store with a few smoke-preset runs and their analysis tables, built once
  per test session (the first process to need it builds it, under a lock, where PELAB_SMOKE_SHARED points) and
  copied into each test process (every test module of the process shares its copy);
* `AppServer`: the Dash app served on 127.0.0.1 on a free port, in a thread;
* `driver()`: one headless Debian chromium (/usr/bin/chromium + /usr/bin/chromedriver, never a downloaded
  browser) driven by selenium, shared by the whole process; `browser_skip_reason()` says why it cannot run;
* `console_errors(drv)`: SEVERE entries of the browser console.

Screenshots go to `artifacts/` (ignored by git); `PELAB_UPDATE_SCREENSHOTS=1` also copies them to docs/img/.
`shoot_pages()` (also `python tests/browser.py screenshots`): every page of the app on the shipped results, with
its defaults, screenshotted (docs/img/dashboard_<page>.png) and looked over by `page_problems`.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts"
DOCS_IMG = REPO / "docs" / "img"
CHROMIUM = os.environ.get("PELAB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("PELAB_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000", "--hide-scrollbars"]

# The smoke store: (scheme, task, scheme_kwargs) trained at the smoke preset.
SMOKE_RUNS = {"rope": ("rope", "trigger-distance", {}), "nope": ("nope", "trigger-distance", {}),
              "partial": ("rope", "trigger-distance", {"rope_heads": 1, "rope_layers": [0]}),  # partial RoPE
              "count": ("rope", "trigger-count", {})}
# the per-head causal analyses (Heads page), computed for the RoPE run only
HEAD_ANALYSES = ["ablation_resample", "patching", "attribution", "edges", "qkv", "probes", "trigger_attention", "dla",
                 "self_repair", "head_summary"]
# analyses left out on purpose: the UI must offer to compute them
SMOKE_SKIP = {"count": {"spectral", "extrapolation", *HEAD_ANALYSES}, "nope": set(HEAD_ANALYSES),
              "partial": set(HEAD_ANALYSES)}
# tables computed for every smoke run (the rest are left missing on purpose: the UI shows hints for them)
SMOKE_ANALYSES = ["ablation", "qk_means", "angles", "spectral", "distance_bias", "extrapolation", *HEAD_ANALYSES]


@contextlib.contextmanager
def torch_threads(n: int):
    """Run with n intra-op torch threads (smoke models gain nothing from more, and on a shared 2-core machine
    two OpenMP threads competing with another process are many times slower than one), then restore."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _tmp_root() -> Path:
    d = Path(tempfile.mkdtemp(prefix="pelab-ui-"))
    atexit.register(shutil.rmtree, d, True)
    return d


@functools.lru_cache(maxsize=1)
def smoke_store() -> SimpleNamespace:
    """Train the smoke runs and compute their tables once per session; this process's own copy of them.

    Returns a namespace: `root` (the store folder), one run id per SMOKE_RUNS key, plus `failed` (a run
    marked failed) and `created` (a run that never trained), so the UI shows them as such. The build (about
    13 CPU-s) goes to $PELAB_SMOKE_SHARED (set by tests/conftest.py for the session's workers) by the first
    process that asks, under a file lock, whole or not at all (built aside, then renamed); each process copies
    it, so what a test writes to its store is never seen by another process's tests. Without the variable (a
    script, or pytest told otherwise), it is built here."""
    import fcntl
    import json

    own = _tmp_root()
    shared = os.environ.get("PELAB_SMOKE_SHARED")
    if not shared:
        with torch_threads(1):
            return _build_smoke_store(own)
    shared = Path(shared)
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "store" / "ids.json").exists():
            shutil.rmtree(shared / "building", ignore_errors=True)
            with torch_threads(1):
                ids = _build_smoke_store(shared / "building")
            (shared / "building" / "ids.json").write_text(json.dumps(
                {k: v for k, v in vars(ids).items() if k not in ("root", "shipped")}))
            (shared / "building").rename(shared / "store")
        # not the stores' index.sqlite: a cache of rows that name the folder they were built in (rebuilt here)
        shutil.copytree(shared / "store", own, dirs_exist_ok=True, ignore=shutil.ignore_patterns("index.sqlite"))
    ids = json.loads((own / "ids.json").read_text())
    return SimpleNamespace(root=own / "runs", shipped=own / "shipped", **ids)


def _build_smoke_store(base: Path) -> SimpleNamespace:
    """The smoke store trained and analysed in base/ (runs/, its data_cache/, shipped/)."""
    from workbench.store import RunStore
    from workbench.train.loop import train
    from workbench.train.presets import resolve_config

    root = base / "runs"
    store = RunStore(root)
    ids = {}
    for key, (scheme, task, kw) in SMOKE_RUNS.items():
        sets = [(f"model.scheme_kwargs.{k}", v) for k, v in kw.items()]
        cfg = resolve_config(preset="smoke", scheme=scheme, task=task, sets=sets, store=store)
        ids[key] = train(cfg, store, progress=False).id
    try:
        from workbench.analysis import ANALYSES
    except ImportError:
        ANALYSES = {}
    for key, rid in ids.items():
        run = store.get(rid)
        for name in SMOKE_ANALYSES:
            fn = ANALYSES.get(name)
            if fn is None or name in SMOKE_SKIP.get(key, ()):
                continue
            try:
                df = fn(run)
            except Exception as e:  # NotApplicable (e.g. angles of NoPE): the UI says so
                if type(e).__name__ != "NotApplicable":
                    raise
                continue
            if not run.has_table(name):
                run.save_table(name, df)
    # a failed run and a run that never trained
    bad = resolve_config(preset="smoke", scheme="alibi", task="trigger-distance", store=store)
    run = store.create(bad)
    run.update_info(status="failed", error="RuntimeError: CUDA out of memory (simulated for the UI tests)")
    ids["failed"] = run.id
    ids["created"] = store.create(resolve_config(preset="smoke", scheme="sinusoidal", task="trigger-distance",
                                                 store=store)).id
    # a small shipped results store (tables, no weights) for the Findings page
    from workbench.store.ship import ship_run

    shipped = root.parent / "shipped"
    for key, rid in ids.items():
        if key not in ("failed", "created") and store.get(rid).has_table("ablation"):
            ship_run(store.get(rid), shipped)
    return SimpleNamespace(root=root, shipped=shipped, **ids)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    """Serve a Dash app (or any WSGI app) on 127.0.0.1 in a daemon thread."""

    def __init__(self, wsgi_app):
        import logging

        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request

        self.port = free_port()
        self.server = make_server("127.0.0.1", self.port, wsgi_app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(5)


def browser_skip_reason() -> str | None:
    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (Path(path).exists() and os.access(path, os.X_OK)):
            return f"{path} not found: install Debian's {pkg} (`make browser`, or apt-get install chromium " \
                   "chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


_DRIVER = None


def driver():
    """The process-wide headless chromium (created on first use, quit at exit)."""
    global _DRIVER
    if _DRIVER is None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in CHROME_FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={_tmp_root() / 'chromium-profile'}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        _DRIVER = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        _DRIVER.set_page_load_timeout(60)
        atexit.register(_quit)
    return _DRIVER


def _quit() -> None:
    global _DRIVER
    if _DRIVER is not None:
        try:
            _DRIVER.quit()
        finally:
            _DRIVER = None


def console_errors(drv) -> list[dict]:
    """SEVERE browser-console entries since the last call (the log is drained on read)."""
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


def wait_until(fn, timeout: float = 30.0, interval: float = 0.2, what: str = "condition"):
    """Poll fn() until it returns something truthy; AssertionError naming `what` on timeout."""
    end = time.time() + timeout
    last_exc = None
    while time.time() < end:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # stale elements while Dash re-renders
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}" +
                         (f" (last error: {last_exc!r})" if last_exc else ""))


def dash_idle(drv) -> bool:
    """No Dash callback in flight (the renderer marks the document while loading)."""
    return drv.execute_script(
        "return !document.querySelector('[data-dash-is-loading=\"true\"]') && "
        "document.readyState === 'complete'")


def trace_counts(drv, root_css: str = "") -> list[int]:
    """Number of data traces of every rendered plotly graph (under root_css)."""
    return drv.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' .js-plotly-plot'))"
        ".map(g => (g.data || []).length);", root_css)


def screenshot(drv, name: str, width: int = 1400, to_docs: bool = False) -> Path:
    """Full-page PNG into artifacts/ (and docs/img/ with `to_docs` or when PELAB_UPDATE_SCREENSHOTS=1)."""
    ARTIFACTS.mkdir(exist_ok=True)
    height = 0
    for _ in range(3):  # graphs re-lay out after a resize: grow until the page fits
        new = int(drv.execute_script("return Math.min(9000, document.documentElement.scrollHeight)"))
        if new <= height:
            break
        height = new
        drv.set_window_size(width, max(900, height + 140))
        time.sleep(0.5)
    path = ARTIFACTS / f"{name}.png"
    drv.save_screenshot(str(path))
    drv.set_window_size(1400, 1000)
    if to_docs or os.environ.get("PELAB_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / f"{name}.png")
    return path


def select_option(drv, dropdown_id: str, text: str, close: bool = True) -> None:
    """Pick the option labelled `text` in a Dash 4 dcc.Dropdown (click it open, click the option)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    if not drv.find_elements(By.CSS_SELECTOR, "[role=option]"):  # open it (a multi-select may still be open)
        drv.find_element(By.ID, dropdown_id).click()

    def find():
        for opt in drv.find_elements(By.CSS_SELECTOR, "[role=option]"):
            if opt.text.strip() == text:
                return opt
        return None

    wait_until(find, 10, what=f"option {text!r} of #{dropdown_id}").click()
    if close:
        drv.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        wait_until(lambda: not drv.find_elements(By.CSS_SELECTOR, "[role=option]"), 5,
                   what=f"#{dropdown_id} to close")


# ---- one look over every page, and the screenshots in docs/img --------------------------------------------------
# (path, screenshot name, the run dropdown whose default must be a run that learned, or None)
SHOT_PAGES = [("/", "findings", None), ("/runs", "runs", None), ("/ablation", "ablation", "abl-run-a"),
              ("/heads", "heads", "heads-run"), ("/partial-rope", "partial_rope", None),
              ("/qk-means", "qk_means", "qk-run"), ("/angles", "angles", "ang-run"),
              ("/spectral", "spectral", "spec-run"),
              ("/distance-bias", "distance_bias", "dist-run"), ("/extrapolation", "extrapolation", "extr-run"),
              ("/explorer", "explorer", "exp-run")]
SHOT_WIDTH = 1600
MAX_LEGEND = 12          # legend entries per figure
MAX_DECIMALS = 4         # significant decimals per table cell (0.000123 has 3)
_NUMBER = re.compile(r"(?<![\w.])-?\d+\.(\d+)(?![\w.])")

# in the page: per plotly graph, its number of traces, of traces with data, and of legend entries
_GRAPHS_JS = """return Array.from(document.querySelectorAll('.content .js-plotly-plot')).filter(
    g => !g.closest('[style*="display: none"]')).map(g => {  // a graph hidden on purpose (style) is not shown
  const data = g._fullData || g.data || [];
  const filled = data.filter(t => t.visible !== false && ['x', 'y', 'z', 'values'].some(
      k => t[k] && (t[k].length > 0 || (t[k].bdata && t[k].bdata.length > 0)))).length;
  return {title: ((g.layout || {}).title || {}).text || '', traces: data.length, filled: filled,
          legend: g.querySelectorAll('.legend .traces').length};
});"""


# in the page: per plotly graph on screen, its text that a reader cannot read: a tick label, axis or figure title,
# annotation or legend entry past the figure's left or right edge ("cut"), and pairs of them drawn over each other
# by more than 2 px across and 3 px down (rotated labels are left out: their boxes overlap when the text does not)
_TEXT_JS = r"""return Array.from(document.querySelectorAll(arguments[0] + ' .js-plotly-plot')).flatMap(g => {
  if (!g.getClientRects().length || !g.querySelector('.main-svg')) return [];
  const title = (((g.layout || {}).title || {}).text || '').slice(0, 60);
  const box = g.querySelector('.main-svg').getBoundingClientRect();
  const sel = '.xtick text, .ytick text, text[class$="title"], .annotation-text, .legendtext';
  const ts = Array.from(g.querySelectorAll(sel)).map(t => [t.textContent, t.getBoundingClientRect(),
      (t.getAttribute('transform') || '') + ((t.closest('g[transform]') || t).getAttribute('transform') || '')])
    .filter(([s, r, tr]) => s && r.width > 0 && r.height > 0 && !/rotate\((?!0[ ,)])/.test(tr));
  const out = [];
  for (const [s, r] of ts)
    if (r.right > box.right + 1 || r.left < box.left - 1) out.push({title: title, cut: s.slice(0, 60)});
  for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
    const a = ts[i][1], b = ts[j][1];
    if (Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2 && Math.min(a.bottom, b.bottom) -
        Math.max(a.top, b.top) > 3) out.push({title: title, over: [ts[i][0].slice(0, 40), ts[j][0].slice(0, 40)]});
  }
  return out;
});"""


def unreadable_text(drv, root: str = ".content") -> list[str]:
    """The text of the figures under `root` (a CSS selector; the app's pages: .content) that a reader cannot read as
    drawn (`_TEXT_JS`): cut at a figure's edge, or drawn over other text; one line each."""
    return [f"figure {t['title']!r}: " + (f"{t['cut']!r} is cut at the figure's edge" if "cut" in t
                                         else f"{t['over'][0]!r} and {t['over'][1]!r} are drawn over each other")
            for t in drv.execute_script(_TEXT_JS, root)]


def significant_decimals(text: str) -> int:
    """Most significant decimals of any number in a cell: digits after the point, leading zeros not counted
    (0.983 -> 3, 0.000123 -> 3, 7.638999938964844 -> 15)."""
    return max((len(m.group(1).lstrip("0")) for m in _NUMBER.finditer(text)), default=0)


# the text of every table cell a reader sees (a cell in a folded table is not rendered: '' as WebElement.text says)
_CELLS_JS = """return Array.from(document.querySelectorAll('.content .dash-spreadsheet td')).map(
  td => td.getClientRects().length ? td.innerText : '');"""


def page_problems(drv, name: str, run_dropdown: str | None) -> list[str]:
    """What a person would call wrong on the page shown: an error box or traceback, console errors, an empty
    figure, figure text cut at its edge or drawn over other text (`unreadable_text`), a table cell with more than
    MAX_DECIMALS significant decimals, a legend of more than MAX_LEGEND entries, a default run that did not learn the
    task."""
    from selenium.webdriver.common.by import By

    out = []
    text = drv.find_element(By.CSS_SELECTOR, ".content").text
    if "Traceback" in text:
        out.append(f"{name}: a traceback is shown")
    for el in drv.find_elements(By.CSS_SELECTOR, ".content .hint-error"):
        out.append(f"{name}: error box: {el.text[:160]!r}")
    out += [f"{name}: console: {e.get('message', '')[:160]}" for e in console_errors(drv)]
    for g in drv.execute_script(_GRAPHS_JS):
        if g["filled"] == 0:
            out.append(f"{name}: empty figure {g['title'][:60]!r} ({g['traces']} traces, none with data)")
        if g["legend"] > MAX_LEGEND:
            out.append(f"{name}: figure {g['title'][:60]!r} has {g['legend']} legend entries (> {MAX_LEGEND})")
    out += [f"{name}: {t}" for t in unreadable_text(drv)]
    for t in drv.execute_script(_CELLS_JS):  # one round trip, not one a cell (the Findings page has hundreds)
        if significant_decimals(t) > MAX_DECIMALS:
            out.append(f"{name}: table cell {t[:60]!r} shows more than {MAX_DECIMALS} significant decimals")
            break
    if run_dropdown:
        shown = drv.find_elements(By.ID, run_dropdown)
        label = shown[0].text if shown else ""
        from workbench.analysis.claims import NOT_LEARNED

        if any(f" {word} " in label for word in NOT_LEARNED):  # the label's registered status word
            out.append(f"{name}: the default run did not learn the task: {label[:120]!r}")
        if not label.strip():
            out.append(f"{name}: no default run in #{run_dropdown}")
    return out


def _settle(drv, path: str, timeout: float = 120) -> None:
    from selenium.webdriver.common.by import By

    wait_until(lambda: drv.find_elements(By.CSS_SELECTOR, ".content h2"), timeout, what=f"{path} to render")
    time.sleep(1.0)
    wait_until(lambda: dash_idle(drv), timeout, what=f"{path} to settle")
    wait_until(lambda: drv.execute_script(_DRAWN_JS), timeout, what=f"{path}'s graphs to draw")
    time.sleep(0.3)


# every plotly graph of the page drawn: plotly has laid it out and put its SVG in place (after the last callback)
_DRAWN_JS = """return Array.from(document.querySelectorAll('.content .js-plotly-plot')).every(
  g => g._fullLayout && g.querySelector('.main-svg'));"""


def shoot_pages(shipped: str = str(REPO / "results" / "repro"), store_root: str | None = None,
                pages: list[str] | None = None, to_docs: bool = False) -> tuple[list[Path], list[str]]:
    """Serve the app on the shipped results (and an empty own store, unless `store_root`), open every page of
    SHOT_PAGES (or `pages`) with its defaults in headless chromium at SHOT_WIDTH px, screenshot it (artifacts/, and
    docs/img/dashboard_<page>.png with `to_docs`) and look it over (`page_problems`). Returns (paths, problems)."""
    from apps import create_app

    unknown = set(pages or ()) - {name for _, name, _ in SHOT_PAGES}
    if unknown:
        raise SystemExit(f"unknown pages {sorted(unknown)}; pick from {[n for _, n, _ in SHOT_PAGES]}")
    root = store_root or str(ARTIFACTS / "empty-store")  # shown in the header as `your runs: artifacts/empty-store`
    Path(root).mkdir(parents=True, exist_ok=True)
    srv = AppServer(create_app(root, cache_dir=ARTIFACTS / "shots-cache", shipped=shipped).server)
    drv = driver()
    paths, problems = [], []
    try:
        drv.get_log("browser")  # drain
        for path, name, dropdown in SHOT_PAGES:
            if pages and name not in pages:
                continue
            drv.set_window_size(SHOT_WIDTH, 1000)
            drv.get(srv.url + path)
            _settle(drv, path)
            problems += page_problems(drv, name, dropdown)
            paths.append(screenshot(drv, f"dashboard_{name}", width=SHOT_WIDTH, to_docs=to_docs))
    finally:
        srv.stop()
    return paths, problems


FINDINGS_MAX_HEIGHT = 4350  # px at SHOT_WIDTH with its tables folded (it was 17,258 with them open in cells; 3,968
# before the paper-scale line of 2026-11-28, which takes about 60 px; 4,050 before 2026-11-29's readable labels and
# titles: the verdict matrix's two-line rows and legend below it, long titles on two lines, 4,178 after; 4,239 before
# 2026-12-06's "not the paper's setup" line that opens the seed study's card, 26 px, 4,265 after; 4,309 after study
# tier 4's folded line, one line a registered tier, its decision in the line; the cap was 4,300 until then)

# per table of the page: its right edge beyond its card's, or a horizontal scroll bar (columns out of sight)
_CUT_TABLES_JS = """return Array.from(document.querySelectorAll('.content .dash-spreadsheet-container')).map(t => {
  const card = t.closest('.card') || document.querySelector('.content');
  const inner = t.querySelector('.dash-spreadsheet-inner') || t;
  return {id: (t.closest('[id]') || {}).id || '?', over: Math.round(t.getBoundingClientRect().right -
          card.getBoundingClientRect().right), scroll: inner.scrollWidth - inner.clientWidth};
}).filter(t => t.over > 2 || t.scroll > 2);"""


REPORT_SHOT_HEIGHT = 1700  # px of the report's top in docs/img/report.png: the box, then the verdict matrix


def shoot_report(shipped: str = str(REPO / "results" / "repro"), to_docs: bool = False) -> Path:
    """`workbench report` as a user of a fresh checkout gets it (an empty own store beside the shipped results,
    every run), opened from disk in headless chromium at 1,400 px, its first REPORT_SHOT_HEIGHT px screenshotted
    once every figure has drawn (artifacts/report.png, and docs/img/report.png with `to_docs`)."""
    from workbench.report import build_report
    from workbench.store import StoreSet

    root = ARTIFACTS / "empty-store"
    root.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / "report-shot" / "report.html"
    summary = build_report(StoreSet.open(root, shipped=shipped), "all", out)
    drv = driver()
    drv.set_window_size(1400, REPORT_SHOT_HEIGHT)
    drv.get(out.as_uri())
    n = len(summary["figures"])
    wait_until(lambda: len([c for c in trace_counts(drv) if c > 0]) == n, 120, what=f"{n} rendered plotly graphs")
    time.sleep(0.5)
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "report.png"
    drv.save_screenshot(str(path))
    drv.set_window_size(1400, 1000)
    if to_docs:
        shutil.copyfile(path, DOCS_IMG / "report.png")
    return path


def set_folds(drv, open_: bool) -> None:
    """Open (or close) every <details> fold of the page's content; an opened one gets a second to lay out."""
    drv.execute_script(f"document.querySelectorAll('.content details').forEach(d => d.open = {str(open_).lower()})")
    if open_:
        time.sleep(1.0)


def findings_look(drv, url: str, timeout: float = 180) -> dict:
    """Open the Findings page at SHOT_WIDTH and measure what a reader meets: seconds until its verdict matrix and
    deposit map are drawn and no callback is in flight (`render_s`; the page's tables are computed once per store
    state, so a second load is the usual one), the page's height with its tables folded, where the two pictures
    start (px from the top: within the first screen?), and, with every fold opened, the tables cut off at the
    right (`cut`)."""
    from selenium.webdriver.common.by import By

    drv.set_window_size(SHOT_WIDTH, 1000)
    t0 = time.time()
    drv.get(url)
    drawn = "#find-matrix .main-svg, #find-deposits .main-svg"
    wait_until(lambda: len(drv.find_elements(By.CSS_SELECTOR, drawn)) >= 2 and dash_idle(drv), timeout,
               what="the verdict matrix and the deposit map")
    out = {"render_s": time.time() - t0,
           "height": int(drv.execute_script("return document.documentElement.scrollHeight")),
           "tops": drv.execute_script("return ['find-matrix', 'find-deposits'].map(i => Math.round("
                                      "document.getElementById(i).getBoundingClientRect().top))")}
    set_folds(drv, True)
    out["cut"] = drv.execute_script(_CUT_TABLES_JS)
    out["tables"] = len(drv.find_elements(By.CSS_SELECTOR, ".content .dash-spreadsheet-container"))
    set_folds(drv, False)
    return out


LAPTOP_WIDTHS = (1280, 1024)  # a laptop's window, two-column cards; and one where the cards stack (max-width 1100px)


def unreadable_at(drv, url: str, width: int, timeout: float = 180) -> list[str]:
    """`unreadable_text` of the page at `url` opened `width` px wide, every fold opened (the folded figures too)."""
    drv.set_window_size(width, 1000)
    drv.get(url)
    _settle(drv, url, timeout)
    set_folds(drv, True)
    wait_until(lambda: drv.execute_script(_DRAWN_JS) and dash_idle(drv), timeout, what=f"{url}'s folded graphs")
    return [f"{width} px: {t}" for t in unreadable_text(drv)]


USAGE = """usage: python tests/browser.py screenshots [--shipped DIR] [--store DIR] [--pages findings,heads,report,...]

Serves the dashboard on the shipped results (default results/repro; own store: an empty one, or --store), opens
every page with its defaults in headless chromium and writes docs/img/dashboard_<page>.png, then prints what
`page_problems` finds wrong on each page (exit status 1 when anything is). `report` (in the default list too):
`workbench report` of the shipped results, the top of it as docs/img/report.png (`shoot_report`)."""


if __name__ == "__main__":
    import argparse
    import sys

    parser = argparse.ArgumentParser(usage=USAGE)
    parser.add_argument("command", choices=["screenshots"])
    parser.add_argument("--shipped", default=str(REPO / "results" / "repro"))
    parser.add_argument("--store", default=None)
    parser.add_argument("--pages", default=None, help="comma-separated page names (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    pages = args.pages.split(",") if args.pages else None
    dash_pages = [q for q in pages if q != "report"] if pages else None
    written, found = shoot_pages(args.shipped, args.store, dash_pages, to_docs=True) if dash_pages != [] else ([], [])
    if pages is None or "report" in pages:
        written.append(shoot_report(args.shipped, to_docs=True))
    for p in written:
        print("wrote", p)
    for p in found:
        print("PROBLEM", p)
    _quit()
    sys.exit(1 if found else 0)
