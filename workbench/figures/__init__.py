"""Figures: one module per analysis, each function `DataFrame -> plotly.graph_objects.Figure`, built from the
table alone (no run, no model). The dashboard, the reports and the notebooks all call these.

    from workbench.figures import FIGURES
    fig = FIGURES["ablation"](run.load_table("ablation"))

Every module draws with the shared grammar of `workbench.figures.style` (scheme colours, layer colours,
dash styles, heatmaps, baselines) and contributes its builders through a module-level `FIGURES` dict; a new
module is registered by adding its name to `MODULES`. Table schemas: docs/analyses.md. Trace counts are part
of the contract (tests check them) and are given in each docstring.
"""
from __future__ import annotations

import importlib
from typing import Callable

MODULES = ("ablation", "qk_means", "angles", "spectral", "distance_bias", "extrapolation", "experiments",
           "findings", "heads")


def _collect(modules: tuple[str, ...]) -> dict[str, Callable]:
    """Merge the modules' FIGURES dicts; two modules claiming one name is a programming error."""
    out: dict[str, Callable] = {}
    for mod in modules:
        for name, fn in importlib.import_module(f"{__name__}.{mod}").FIGURES.items():
            if name in out:
                raise RuntimeError(f"figure {name!r} registered by workbench.figures.{mod} and by "
                                   f"{out[name].__module__}")
            out[name] = fn
    return out


FIGURES = _collect(MODULES)

__all__ = ["FIGURES", "MODULES"]
