"""Markdown pieces shared by the generated documents (COMPARISON.md, the README's findings block): a verdict's mark,
a share as a percentage, a table, links to run folders."""
from __future__ import annotations

from workbench.analysis.claims.runs import pct  # the percentage cell of a table, re-exported

__all__ = ["VERDICT_MARK", "links", "mark", "md_table", "pct"]

VERDICT_MARK = {"reproduced": "**reproduced**", "mixed": "**mixed**", "not reproduced": "**not reproduced**"}


def mark(verdict: str) -> str:
    return VERDICT_MARK.get(verdict, f"*{verdict}*" if verdict != "pending" else verdict)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    def clean(c: str) -> str:
        return str(c).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(clean(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def links(run_ids, limit: int = 6) -> str:
    ids = list(run_ids)
    shown = ", ".join(f"[{r}]({r}/)" for r in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
