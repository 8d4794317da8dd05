"""`workbench` command line. Each command group lives in its own module with a `register(app)`.

Every command turns bad input into `error: ...` on stderr and exit code 2, never a traceback: `ValueError`
(invalid config, argument or query), `StoreError` (unknown run, corrupt file, locked run, read-only store) and
`OSError` (a path that cannot be written) are caught once, here, by the command group.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # entry point: before any command imports torch

import typer  # noqa: E402
from typer.core import TyperGroup  # noqa: E402

from . import analyze, app_cmd, data, figure, report, repro, schemes, train, verify  # noqa: E402
from .options import fail  # noqa: E402


class _Group(TyperGroup):
    def invoke(self, ctx):
        from workbench.store import StoreError

        try:
            return super().invoke(ctx)
        except (ValueError, StoreError, FloatingPointError) as e:  # FloatingPointError: a training run diverged
            fail(str(e))
        except OSError as e:
            fail(f"cannot use {e.filename or 'a path'}: {e.strerror or e}")


app = typer.Typer(help="PE-Lab: positional-encoding interpretability workbench.", no_args_is_help=True,
                  add_completion=False, cls=_Group)


@app.callback()
def _root() -> None:
    """PE-Lab: positional-encoding interpretability workbench."""


for _module in (data, schemes, train, analyze, report, repro, verify, figure, app_cmd):
    _module.register(app)


def main() -> None:
    app()
