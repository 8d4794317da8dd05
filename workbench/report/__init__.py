"""Self-contained HTML reports over a selection of runs, plus a machine-readable `summary.json`.

    from workbench.report import build_report
    summary = build_report(store, "scheme=rope,task=trigger-distance", "report.html")

The report reads the runs only through the store, draws only with `workbench.figures.FIGURES` and computes
deposit statistics with `workbench.analysis`; plotly.js is inlined once, so the file works offline.
"""
from .build import ANALYSIS_SECTIONS, build_report, parse_query, select_runs, summarize_run

__all__ = ["ANALYSIS_SECTIONS", "build_report", "parse_query", "select_runs", "summarize_run"]
