"""`workbench app`: start the Dash dashboard over a run store."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("app")
    def app_cmd(
        host: str = typer.Option("127.0.0.1", help="interface to bind (local only by default)"),
        port: int = typer.Option(8050, help="port to serve on"),
        public: bool = typer.Option(False, "--public", help="bind 0.0.0.0 (reachable from other machines)"),
        runs: Optional[Path] = typer.Option(None, "--runs", help="run store (default: $PELAB_RUNS or ./runs)"),
        debug: bool = typer.Option(False, help="Dash debug mode (hot reload, error overlay)"),
    ) -> None:
        """Start the PE-Lab dashboard (runs, ablation atlas, partial RoPE, diagnostics, attention explorer)."""
        from apps import create_app

        dash_app = create_app(runs)
        bind = "0.0.0.0" if public else host
        if bind not in ("127.0.0.1", "localhost", "::1"):
            typer.secho(f"warning: serving on {bind}: anyone who can reach this machine can read the runs and "
                        "start jobs", fg=typer.colors.YELLOW, err=True)
        typer.echo(f"PE-Lab dashboard on http://{'127.0.0.1' if bind == '0.0.0.0' else bind}:{port}/ "
                   f"(store {dash_app.server.config['PELAB'].store_root})")
        dash_app.run(host=bind, port=port, debug=debug)
