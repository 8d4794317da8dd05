"""`workbench` command line. Each command group lives in its own module with a `register(app)`.

Every command turns bad input into `error: ...` on stderr and exit code 2, never a traceback: `ValueError`
(invalid config, argument or query), `StoreError` (unknown run, corrupt file, locked run, read-only store) and
`OSError` (a path that cannot be written) are caught once, here, by the command group.
"""
import inspect
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


def _prose(doc: str) -> str:
    """A command's docstring as its `--help` text: paragraphs kept, the line breaks inside each joined. Typer (0.29)
    keeps them after the first paragraph, so a paragraph re-wrapped to the terminal broke again at every source
    line."""
    return "\n\n".join(" ".join(p.split("\n")) for p in inspect.cleandoc(doc).split("\n\n"))


for _module in (data, schemes, train, analyze, report, repro, verify, figure, app_cmd):
    _module.register(app)
_grouped = [c for g in app.registered_groups for c in g.typer_instance.registered_commands]  # `workbench data ...`
for _cmd in [*app.registered_commands, *_grouped]:
    _cmd.help = _prose(_cmd.help or _cmd.callback.__doc__ or "")


def main() -> None:
    app()
