"""`workbench` command line. Each command group lives in its own module with a `register(app)`."""
import typer

from . import analyze, app_cmd, data, figure, report, schemes, train

app = typer.Typer(help="PE-Lab: positional-encoding interpretability workbench.", no_args_is_help=True,
                  add_completion=False)


@app.callback()
def _root() -> None:
    """PE-Lab: positional-encoding interpretability workbench."""


for _module in (data, schemes, train, analyze, report, figure, app_cmd):
    _module.register(app)


def main() -> None:
    app()
