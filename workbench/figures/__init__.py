"""Figures: one module per analysis, each function `DataFrame -> plotly.graph_objects.Figure`, built from the
table alone (no run, no model). The dashboard, the reports and the notebooks all call these.

    from workbench.figures import FIGURES
    fig = FIGURES["ablation"](run.load_table("ablation"))

Every module draws with the shared grammar of `workbench.figures.style` (scheme colours, layer colours,
dash styles, heatmaps, baselines) and contributes its builders through a module-level `FIGURES` dict (and,
for builders drawn from another figure's table, `TABLES = {figure: table}`; for those drawing several runs'
tables, concatenated, `MULTI_RUN`; for those drawn from no stored table, `ELSEWHERE = {figure: where it is
drawn}`); a new module is registered by adding its name to `MODULES`. `TABLE_OF[figure]` names the stored table
(or experiment) a figure reads.
Table schemas: docs/analyses.md. Trace counts are part of the contract (tests check them) and are given in
each docstring.
"""
from __future__ import annotations

import importlib
from typing import Callable

MODULES = ("ablation", "qk_means", "angles", "spectral", "distance_bias", "extrapolation", "experiments",
           "patterns", "findings", "study", "heads", "self_repair")


def _collect(modules: tuple[str, ...]):
    """Merge the modules' FIGURES (and TABLES, MULTI_RUN, ELSEWHERE); two modules claiming one name is a programming
    error, and so is a MULTI_RUN or ELSEWHERE name its module does not register."""
    out: dict[str, Callable] = {}
    tables: dict[str, str] = {}
    multi: list[str] = []
    elsewhere: dict[str, str] = {}
    for mod in modules:
        m = importlib.import_module(f"{__name__}.{mod}")
        for name, fn in m.FIGURES.items():
            if name in out:
                raise RuntimeError(f"figure {name!r} registered by workbench.figures.{mod} and by "
                                   f"{out[name].__module__}")
            out[name] = fn
            tables[name] = getattr(m, "TABLES", {}).get(name, name)
        multi += getattr(m, "MULTI_RUN", ())
        elsewhere |= getattr(m, "ELSEWHERE", {})
        stray = (set(getattr(m, "MULTI_RUN", ())) | set(getattr(m, "ELSEWHERE", {}))) - set(m.FIGURES)
        if stray:
            raise RuntimeError(f"workbench.figures.{mod} names {sorted(stray)} in MULTI_RUN/ELSEWHERE, not in FIGURES")
    return out, tables, tuple(multi), elsewhere


FIGURES, TABLE_OF, MULTI_RUN, ELSEWHERE = _collect(MODULES)
"""MULTI_RUN: the figures of several runs (a panel or a line each; the others draw one run's table). ELSEWHERE:
the figures drawn from no stored table (the findings over runs, live attention) -> where they are drawn instead."""

__all__ = ["ELSEWHERE", "FIGURES", "MODULES", "MULTI_RUN", "TABLE_OF"]
