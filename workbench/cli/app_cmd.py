"""`workbench app`: start the Dash dashboard over a run store (and the read-only shipped results)."""
from __future__ import annotations

import errno
from pathlib import Path
from typing import Optional

import typer

from .options import SHIPPED_HELP, alias_option, existing_root, pick_root, root_option


def register(app: typer.Typer) -> None:
    @app.command("app")
    def app_cmd(
        host: str = typer.Option("127.0.0.1", help="interface to bind (local only by default)"),
        port: int = typer.Option(8050, min=1, max=65535, help="port to serve on (1-65535)"),
        public: bool = typer.Option(False, "--public", help="bind 0.0.0.0 (reachable from other machines)"),
        root: Optional[Path] = root_option(),
        runs: Optional[Path] = alias_option("--runs"),
        shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
        debug: bool = typer.Option(False, help="Dash debug mode (hot reload, error overlay with tracebacks); local "
                                   "only: refused with --public or a --host other than this machine's"),
    ) -> None:
        """Start the PE-Lab dashboard (runs, ablation atlas, partial RoPE, diagnostics, attention explorer).

        The stores are fixed here, at start; nothing a browser sends selects another folder."""
        from apps import create_app, start_warm_up

        store_root = existing_root(pick_root(root, runs, "--runs"))  # a mistyped root: exit 2, nothing created
        bind = "0.0.0.0" if public else host
        if debug and bind not in LOCAL:
            raise typer.BadParameter(f"--debug shows tracebacks (with this machine's paths) to every browser: serve "
                                     f"it on this machine only (drop --public / --host {bind})", param_hint="--debug")
        # with --debug, Flask's reloader serves from a child process that runs this command again while the parent
        # holds the port: the child must not take the parent's port for another server's
        from werkzeug.serving import is_running_from_reloader

        busy = None if is_running_from_reloader() else port_in_use(bind, port)
        if busy and busy[0] == errno.EADDRINUSE:
            typer.secho(f"error: port {port} on {bind} is already in use ({busy[1]}); is the dashboard already "
                        f"running (http://127.0.0.1:{port}/)? Stop it, or pick another port: `workbench app --port "
                        f"{port + 10}`", fg=typer.colors.RED, err=True)
            raise typer.Exit(1)
        if busy:  # a name that does not resolve, an address this machine does not have, a port it may not open
            raise typer.BadParameter(f"cannot serve on {bind}:{port} ({busy[1]}); give an address of this machine "
                                     "(127.0.0.1, the default; --public for every interface) and a free port",
                                     param_hint="--host / --port")
        dash_app = create_app(store_root, shipped=shipped)
        if bind not in LOCAL:
            typer.secho(f"warning: serving on {bind}: anyone who can reach this machine can read the runs and "
                        "start jobs", fg=typer.colors.YELLOW, err=True)
        ctx = dash_app.server.config["PELAB"]
        shipped_s = f", shipped results {ctx.shipped_root}" if ctx.shipped_root else ""
        start_warm_up(dash_app)
        typer.echo(f"PE-Lab dashboard on http://{'127.0.0.1' if bind == '0.0.0.0' else bind}:{port}/ "
                   f"(store {ctx.store_root}{shipped_s})")
        dash_app.run(host=bind, port=port, debug=debug)


LOCAL = ("127.0.0.1", "localhost", "::1")  # binds only this machine can reach


def port_in_use(host: str, port: int) -> tuple[int | None, str] | None:
    """Why `host:port` cannot be served, as (errno, text): (EADDRINUSE, "Address already in use") for a port taken,
    another errno for a host name that does not resolve or an address this machine lacks; None when a server can
    bind it."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except socket.gaierror as e:
            return None, f"the host name does not resolve: {e.strerror or e}"
        except OSError as e:
            return e.errno, e.strerror or str(e)
    return None
