"""`workbench` command line. Each command group lives in its own module with a `register(app)`.

Every command turns bad input into `error: ...` on stderr and exit code 2, never a traceback: `ValueError`
(invalid config, argument or query), `StoreError` (unknown run, corrupt file, locked run, read-only store) and
`OSError` (a path that cannot be written) are caught once, here, by the command group.
"""
import click
import typer
from typer.core import TyperGroup

from . import analyze, app_cmd, data, figure, report, repro, schemes, train


class UserError(click.ClickException):
    """Bad input: printed as `error: <message>`, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        typer.secho(f"error: {self.format_message()}", fg=typer.colors.RED, err=True)


class _Group(TyperGroup):
    def invoke(self, ctx):
        from workbench.store import StoreError

        try:
            return super().invoke(ctx)
        except (ValueError, StoreError) as e:
            raise UserError(str(e)) from None
        except OSError as e:
            where = f" {e.filename}" if e.filename else ""
            raise UserError(f"cannot use{where}: {e.strerror or e}") from None


app = typer.Typer(help="PE-Lab: positional-encoding interpretability workbench.", no_args_is_help=True,
                  add_completion=False, cls=_Group)


@app.callback()
def _root() -> None:
    """PE-Lab: positional-encoding interpretability workbench."""


for _module in (data, schemes, train, analyze, report, figure, repro, app_cmd):
    _module.register(app)


def main() -> None:
    app()
