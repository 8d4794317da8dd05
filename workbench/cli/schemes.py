"""`workbench schemes`: list every registered positional-encoding scheme."""
from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

COLUMNS = ("name", "acts_on", "params", "formula", "source", "extrapolation")


def scheme_rows() -> list[dict]:
    """One dict per registered scheme: name, acts_on, params {name: {default, description}}, formula, source,
    extrapolation, can_extrapolate, rotary."""
    from workbench.model.pe import list_schemes

    schemes = list_schemes().items()
    return [dict(name=name, acts_on=cls.acts_on,
                 params={k: {"default": default, "description": desc} for k, (default, desc) in cls.params.items()},
                 formula=cls.formula, source=cls.source, extrapolation=cls.extrapolation,
                 can_extrapolate=cls.can_extrapolate, rotary=cls.rotary)
            for name, cls in schemes]


def _cell(row: dict, col: str) -> Text:
    if col == "params":
        text = "\n".join(f"{k}={p['default']!r}" for k, p in row["params"].items()) or "-"
    elif col == "extrapolation" and not row["can_extrapolate"] and not row[col].lower().startswith("cannot"):
        text = f"cannot: {row[col]}"
    else:
        text = str(row[col])
    return Text(text)  # plain text: formulas contain [ ] that rich would read as markup


def schemes(
    name: str = typer.Argument(None, help="show one scheme with its parameter descriptions"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """List every registered positional-encoding scheme: where it acts, parameters, formula, source, extrapolation."""
    from workbench.model.pe import list_schemes

    registry = list_schemes()
    if name is not None and name not in registry:
        typer.echo(f"unknown scheme {name!r}; known schemes: {', '.join(registry)}", err=True)
        raise typer.Exit(code=2)
    rows = [r for r in scheme_rows() if name is None or r["name"] == name]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=repr))
        return
    console = Console(width=max(Console().width, 160))
    table = Table(title=f"PE-Lab positional-encoding schemes ({len(rows)})", show_lines=True)
    styles = {"name": "bold cyan", "acts_on": "green", "params": "magenta", "source": "dim"}
    for col in COLUMNS:
        table.add_column(col, style=styles.get(col), overflow="fold", no_wrap=col == "name")
    for r in rows:
        table.add_row(*(_cell(r, c) for c in COLUMNS))
    console.print(table)
    if name is not None and rows[0]["params"]:
        console.print("parameters", style="bold")
        for k, p in rows[0]["params"].items():
            console.print(Text(f"  {k} = {p['default']!r}: {p['description']}"))


def register(app: typer.Typer) -> None:
    app.command("schemes")(schemes)
