"""`workbench` command line. Each command group lives in its own module with a `register(app)`."""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # entry point: before any command imports torch

import typer  # noqa: E402

from . import analyze, app_cmd, data, report, schemes, train  # noqa: E402

app = typer.Typer(help="PE-Lab: positional-encoding interpretability workbench.", no_args_is_help=True,
                  add_completion=False)


@app.callback()
def _root() -> None:
    """PE-Lab: positional-encoding interpretability workbench."""


for _module in (data, schemes, train, analyze, report, app_cmd):
    _module.register(app)


def main() -> None:
    app()
