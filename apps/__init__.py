"""PE-Lab dashboard: a Dash multi-page app over the run store.

    from apps import create_app
    app = create_app("runs", shipped="results/repro")   # defaults: $PELAB_RUNS or ./runs; $PELAB_SHIPPED
    app.run(host="127.0.0.1", port=8050)

or `workbench app`. One module per page in `apps/pages/`, each with `PATH`, `NAME`, `ORDER`, a `layout(**query)`
function and `register_callbacks(app)` (callbacks next to their layout). Pages are registered with
`dash.register_page`; callbacks are registered on the app itself (not globally), so several apps -- e.g. on
different stores -- can live in one process. Long work (an analysis not stored yet, training a CPU-preset
run) runs as a background callback through a `DiskcacheManager`.

The stores are fixed here and held server-side (`apps.common.AppContext`); no request value selects a folder.
The job cache folder is removed at exit, including on SIGTERM.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

ASSETS = Path(__file__).parent / "assets"


def page_modules():
    from .pages import (ablation, angles, distance_bias, explorer, extrapolation, findings, heads, partial_rope,
                        qk_means, runs, spectral)

    return [findings, runs, ablation, heads, partial_rope, qk_means, angles, spectral, distance_bias, extrapolation,
            explorer]


def not_found(modules):
    """The page an unknown address shows (Dash's `not_found_404`; its own is a bare "404 - Page not found"): that
    there is no page there, and a link to each page that there is, the Findings page first."""
    from dash import dcc, html

    from .common import hint

    return html.Div([
        html.H2("No page at this address"),
        hint("This address is not one of the dashboard's pages (an old link, or a typo). The pages are listed below; "
             "each one picks its runs from a menu on the page.", kind="missing"),
        html.Ul([html.Li([dcc.Link(m.NAME, href=m.PATH), html.Span(f"  {m.PATH}", className="job-note")])
                 for m in modules], id="not-found-pages")], id="not-found")


def store_caption(own, shipped=None) -> str:
    """`your runs: runs · shipped: results/repro` for the navigation bar (the folders as given, not resolved)."""
    from .common import shown_path

    return f"your runs: {shown_path(own)}" + (f" · shipped: {shown_path(shipped)}" if shipped else "")


def _exit_on_sigterm() -> None:
    """Turn SIGTERM into a normal exit so atexit handlers (cache cleanup) run; only in the main thread and when
    nobody else handles SIGTERM. A second SIGTERM during the cleanup is ignored (it used to raise SystemExit inside
    an atexit callback); a background-job process forked from the app dies as if no handler were installed."""
    import threading

    owner = os.getpid()

    def on_term(signum, frame):
        if os.getpid() != owner:  # a forked job process inherited this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        signal.signal(signum, signal.SIG_IGN)
        sys.exit(128 + signum)

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, on_term)


def _remove_cache(cache, cache_dir: Path) -> None:
    """At exit: stop the background jobs still running (they write into the cache folder and would keep the exit
    waiting for them), close the cache, remove its folder."""
    import multiprocess

    jobs = multiprocess.active_children()
    for p in jobs:
        p.terminate()
    for p in jobs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
    cache.close()
    shutil.rmtree(cache_dir, True)


def create_app(store_root: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
               shipped: str | os.PathLike | None = None):
    """Build the dashboard for the run store at `store_root` (default: $PELAB_RUNS or ./runs) and the read-only
    shipped results at `shipped` (default: $PELAB_SHIPPED, else results/repro when it exists).

    `cache_dir` holds the background-job cache (default: a fresh temporary folder, removed at exit)."""
    import dash
    import diskcache
    import flask
    from dash import DiskcacheManager, dcc, html

    from workbench.store import StoreSet

    from .common import AppContext

    stores = StoreSet.open(store_root, shipped)
    store = stores.own
    own_cache = cache_dir is None
    cache_dir = Path(tempfile.mkdtemp(prefix="pelab-dash-") if own_cache else cache_dir)
    cache = diskcache.Cache(str(cache_dir))
    if own_cache:
        import multiprocess.util  # noqa: F401  registers its atexit join of the jobs first, so ours runs before it

        atexit.register(_remove_cache, cache, cache_dir)
        _exit_on_sigterm()
    manager = DiskcacheManager(cache)
    app = dash.Dash(
        __name__, use_pages=True, pages_folder="", assets_folder=str(ASSETS),
        background_callback_manager=manager, suppress_callback_exceptions=True, title="PE-Lab",
        update_title=None, serve_locally=True,
    )
    app.server.config["PELAB"] = AppContext(store_root=Path(store.root).resolve(), cache_dir=cache_dir,
                                            shipped_root=Path(stores.shipped.root).resolve() if stores.shipped
                                            else None)

    modules = page_modules()
    for m in modules:
        dash.register_page(m.__name__, path=m.PATH, name=m.NAME, title=f"PE-Lab · {m.NAME}", order=m.ORDER,
                           layout=m.layout)
        for alias in getattr(m, "ALIASES", ()):  # a Flask route of this app (Dash's redirect_from adds its routes at
            # the first request of every app built in the process, which Flask refuses once another app has served)
            app.server.add_url_rule(alias, endpoint=f"alias:{alias}", view_func=lambda to=m.PATH: flask.redirect(
                app.get_relative_path(to) + (f"?{flask.request.query_string.decode()}"
                                             if flask.request.query_string else "")))  # the query kept
    # a script path Dash does not serve (a library not registered, a path outside its files, `..`): 404, not
    # Dash's own exception as HTTP 500 with a traceback in the server's log
    app.server.register_error_handler(dash.exceptions.DependencyException,
                                      lambda e: ("no such file", 404))
    dash.register_page("not_found_404", path="/not-found", title="PE-Lab · no such page",  # Dash's name for it
                       layout=lambda **_: not_found(modules))
    nav = html.Nav([html.Span("PE-Lab", className="brand")]
                   + [dcc.Link(m.NAME, href=m.PATH, className="nav-link", id=f"nav-{m.PATH.strip('/') or 'findings'}")
                      for m in modules]
                   + [html.Span(store_caption(store.root, stores.shipped.root if stores.shipped else None),
                                className="store-root", title="the run stores this dashboard reads")],
                   className="navbar")
    app.layout = html.Div([nav, html.Main(dash.page_container, className="content")])
    for m in modules:
        m.register_callbacks(app)
    return app


def warm_up(ctx) -> None:
    """What the first visitor would otherwise wait for: every run's status (the run pickers, `common.warm_index`),
    then the Findings page's tables of the shipped results (`findings.warm`)."""
    from .common import warm_index
    from .pages.findings import warm

    warm_index(ctx)
    if ctx.shipped_root:
        warm(ctx.shipped_root)


def start_warm_up(app) -> None:
    """`warm_up` of an app made by `create_app`, in a daemon thread (`workbench app` and `make demo` call it at
    start)."""
    import threading

    threading.Thread(target=warm_up, args=(app.server.config["PELAB"],), daemon=True).start()
