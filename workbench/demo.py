"""`make demo`: the main job at the CPU preset.

1. generate both datasets and print their summaries.
"""
from __future__ import annotations

from rich.console import Console

import synthetic_tasks as st
from workbench.cli.data import summary_table


def main() -> None:
    console = Console()
    console.rule("[bold]PE-Lab demo: datasets (cpu preset)")
    for task in st.TASKS:
        ds = st.load_or_generate(st.get_spec(task, preset="cpu"))
        console.print(summary_table(ds))


if __name__ == "__main__":
    main()
