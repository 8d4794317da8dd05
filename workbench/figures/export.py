"""Static export of figures for papers (SVG / PDF / PNG) with Plotly's kaleido, which drives a headless
Chromium that is already on the machine (Debian's `chromium`, installed by `make browser`). PE-Lab never
lets kaleido download a browser: it looks for one (PELAB_CHROMIUM, BROWSER_PATH, /usr/bin/chromium, then
chromium / chromium-browser / google-chrome on PATH), hands it to kaleido through BROWSER_PATH, and
raises a clear error naming what to install when there is none.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterable

import plotly.graph_objects as go

FORMATS = ("svg", "pdf", "png")
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class ExportError(ValueError):
    """Static export is impossible here (no browser, no kaleido); the message says what to install (a ValueError,
    so the CLI reports it as `error: ...`, exit 2)."""


def find_browser() -> str | None:
    """Path of a Chromium to export with, or None: $PELAB_CHROMIUM, $BROWSER_PATH, then CANDIDATES."""
    for var in ("PELAB_CHROMIUM", "BROWSER_PATH"):
        p = os.environ.get(var)
        if p:
            return p if Path(p).is_file() and os.access(p, os.X_OK) else None
    for c in CANDIDATES:
        p = c if os.path.isabs(c) else shutil.which(c)
        if p and Path(p).is_file() and os.access(p, os.X_OK):
            return p
    return None


def export_format(path: str | Path, fmt: str | None = None) -> str:
    """The format from `fmt` or the file suffix; ValueError naming the allowed ones otherwise."""
    f = (fmt or Path(path).suffix.lstrip(".")).lower()
    if f not in FORMATS:
        raise ValueError(f"cannot export to {f or 'a file without suffix'!r} ({path}): use one of "
                         f"{', '.join('.' + x for x in FORMATS)}")
    return f


def check_export() -> str:
    """The browser static export will use; ExportError naming what to install when there is none (or no kaleido)."""
    browser = find_browser()
    if browser is None:
        where = next((f"{v}={os.environ[v]!r} is not an executable file" for v in ("PELAB_CHROMIUM", "BROWSER_PATH")
                      if os.environ.get(v)), "no Chromium found (looked for /usr/bin/chromium, chromium, "
                                             "chromium-browser, google-chrome)")
        raise ExportError(f"static figure export needs a headless Chromium: {where}. Install Debian's chromium "
                          "(`make browser` or `apt-get install chromium`) or set BROWSER_PATH to a Chrome/Chromium "
                          "binary; PE-Lab does not download browsers.")
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ExportError("static figure export needs the kaleido package (pip install kaleido; it is in "
                          "pyproject.toml)") from None
    return browser


@contextlib.contextmanager
def _browser():
    """Point kaleido at our browser (BROWSER_PATH) while it runs."""
    browser = check_export()
    old = os.environ.get("BROWSER_PATH")
    os.environ["BROWSER_PATH"] = browser  # what kaleido's browser search reads first
    try:
        yield browser
    finally:
        if old is None:
            os.environ.pop("BROWSER_PATH", None)
        else:
            os.environ["BROWSER_PATH"] = old


ATTEMPTS = 3  # kaleido renders that wrote nothing are tried again, each time in a new browser
RENDER_TIMEOUT_S = 300  # a render kaleido gives up on (its default is 90 s: too short on a loaded 2-core machine)


def write_figures(figs: Iterable[go.Figure], paths: Iterable[str | Path], fmt: str | None = None,
                  width: int | None = None, height: int | None = None, scale: float | None = None) -> list[Path]:
    """Write each figure to its path (format from `fmt` or the suffix) in one browser session; returns the paths.
    width/height default to the figure's layout size (else 1000 x 600 px); `scale` multiplies PNG resolution.
    kaleido returns the errors of the renders that failed rather than raising them, and can return without writing
    a file and without an error (Kaleido #92): the figures whose file was not written are rendered again, up to
    ATTEMPTS in all, and the error then names each and what kaleido said."""
    figs, paths = list(figs), [Path(p) for p in paths]
    if len(figs) != len(paths):
        raise ValueError(f"{len(figs)} figures but {len(paths)} paths")
    if not figs:
        return []
    fmts = [export_format(p, fmt) for p in paths]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
    # kaleido writes each file in place: render beside it under a temporary name and move it over the target only
    # once every figure is written, so an interrupted or failed export leaves the files that were there as they were
    parts = [p.with_name(f".{p.stem}.part{os.getpid()}-{i}{p.suffix}") for i, p in enumerate(paths)]
    todo, said = list(range(len(figs))), []
    try:
        for _ in range(ATTEMPTS):
            with _browser():
                said = _render([{"fig": figs[i].to_dict(), "path": parts[i], "opts": {
                    "format": fmts[i], "width": width or figs[i].layout.width or 1000,
                    "height": height or figs[i].layout.height or 600, "scale": scale or 1}} for i in todo])
            todo = [i for i in todo if not _written(parts[i])]
            if not todo:
                for part, path in zip(parts, paths):
                    os.replace(part, path)
                return paths
    finally:
        for part in parts:
            part.unlink(missing_ok=True)
    raise ExportError(f"the browser wrote no file for {', '.join(str(paths[i]) for i in todo)} ({ATTEMPTS} tries; "
                      f"kaleido said: {'; '.join(said) or 'nothing'}); run the export again, or with fewer figures "
                      "at once")


def _render(specs: list[dict]) -> list[str]:
    """kaleido's renders of `specs` (as plotly.io.write_images hands them, with its plotly.js, MathJax and
    topojson settings) in one new browser; the errors it returned, each as a line."""
    import kaleido
    import plotly.io as pio

    d = pio.defaults
    kopts = {"timeout": RENDER_TIMEOUT_S, **{k: getattr(d, k) for k in ("plotlyjs", "mathjax", "headers")
                                             if getattr(d, k, None)}}
    errors = kaleido.write_fig_from_object_sync([s | {"topojson": d.topojson} for s in specs], kopts=kopts)
    return [f"{type(e).__name__}: {e}"[:300] for e in errors or ()]


def _written(path: Path) -> bool:
    """Whether an export wrote `path` (a temporary name no earlier file had): a non-empty file."""
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def write_figure(fig: go.Figure, path: str | Path, fmt: str | None = None, **kw) -> Path:
    """Write one figure (see `write_figures`)."""
    return write_figures([fig], [path], fmt, **kw)[0]
