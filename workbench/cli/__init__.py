"""`workbench` command line. Each command group lives in its own module with a `register(app)`.

Every command turns bad input into `error: ...` on stderr and exit code 2, never a traceback: `ValueError`
(invalid config, argument or query), `StoreError` (unknown run, corrupt file, locked run, read-only store) and
`OSError` (a path that cannot be written) are caught once, here, by the command group.
"""
import typer
from typer.core import TyperGroup

from . import analyze, app_cmd, data, report, repro, schemes, train


def user_error(message: str) -> typer.Exit:
    """Bad input: print `error: <message>` on stderr; the returned typer.Exit(2) is to be raised. (typer.Exit, not a
    click.ClickException subclass: typer >= 0.16 runs its own vendored click and would not catch that one.)"""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(2)


class _Group(TyperGroup):
    def invoke(self, ctx):
        from workbench.store import StoreError

        try:
            return super().invoke(ctx)
        except (ValueError, StoreError) as e:
            raise user_error(str(e)) from None
        except OSError as e:
            where = f" {e.filename}" if e.filename else ""
            raise user_error(f"cannot use{where}: {e.strerror or e}") from None


app = typer.Typer(help="PE-Lab: positional-encoding interpretability workbench.", no_args_is_help=True,
                  add_completion=False, cls=_Group)


@app.callback()
def _root() -> None:
    """PE-Lab: positional-encoding interpretability workbench."""


for _module in (data, schemes, train, analyze, report, repro, app_cmd):
    _module.register(app)


def main() -> None:
    app()
