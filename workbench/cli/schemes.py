"""`workbench schemes`: list every registered positional-encoding scheme."""
from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

COLUMNS = ("name", "acts_on", "params", "formula", "source", "extrapolation")


def scheme_rows() -> list[dict]:
    """One dict per registered scheme: name, label, acts_on, params {name: {default, description}}, formula,
    source, extrapolation, can_extrapolate, rotary, translation_invariant, train_defaults {field: {value, why}}."""
    from workbench.model.pe import list_schemes

    schemes = list_schemes().items()
    return [dict(name=name, label=cls.label, acts_on=cls.acts_on,
                 params={k: {"default": default, "description": desc} for k, (default, desc) in cls.params.items()},
                 formula=cls.formula, source=cls.source, extrapolation=cls.extrapolation,
                 can_extrapolate=cls.can_extrapolate, rotary=cls.rotary,
                 translation_invariant=cls.translation_invariant,
                 train_defaults={k: {"value": v, "why": why} for k, (v, why) in cls.train_defaults.items()})
            for name, cls in schemes]


# Options that select the seeds' official code where it departs from the papers (docs/paper.md §3, docs/fidelity.md).
OFFICIAL_OPTIONS = [("coca", "score", "released", "CoCA's released slack score: dual form without tying the query pair"),
                    ("fope", "construction", "official", "FoPE's released construction (OLMo-based code)"),
                    ("alibi", "slopes", "reference", "ALiBi's reference slopes for a head count not a power of two"),
                    ("alibi", "slopes", "paper", "the core paper's released slopes exp(-h/H), h = 0..H-1")]


def fidelity_rows() -> list[dict]:
    """One row per field a named fidelity sets: {setting, field, value}; then the seeds' official options."""
    from workbench.train.presets import FIDELITIES

    rows = []
    for name, f in FIDELITIES.items():
        rows.append({"setting": name, "field": "(what it is)", "value": f["doc"]})
        if "arch" in f:
            rows.append({"setting": name, "field": "model.arch", "value": f["arch"]})
        if "scheme" in f:
            rows.append({"setting": name, "field": "model.scheme", "value": f["scheme"]})
        for key, value in f.get("sets", {}).items():
            rows.append({"setting": name, "field": key, "value": value})
        for task, sets in f.get("by_task", {}).items():
            rows += [{"setting": name, "field": f"{key} ({task})", "value": v} for key, v in sets.items()]
        for preset, sets in f.get("by_preset", {}).items():
            rows += [{"setting": name, "field": f"{key} (preset {preset})", "value": v} for key, v in sets.items()]
        for old, (new, kwargs) in f.get("scheme_map", {}).items():
            rows.append({"setting": name, "field": f"scheme {old}", "value": f"{new} {kwargs}"})
        rows += [{"setting": name, "field": f"model.scheme_kwargs.{k}", "value": v}
                 for k, v in f.get("scheme_kwargs", {}).items()]
    rows += [{"setting": "official code", "field": f"{scheme} scheme_kwargs.{param}", "value": f"{value}: {what}"}
             for scheme, param, value, what in OFFICIAL_OPTIONS]
    return rows


def _cell(row: dict, col: str) -> Text:
    if col == "params":
        text = "\n".join(f"{k}={p['default']!r}" for k, p in row["params"].items()) or "-"
    elif col == "extrapolation" and not row["can_extrapolate"] and not row[col].lower().startswith("cannot"):
        text = f"cannot: {row[col]}"
    else:
        text = str(row[col])
    return Text(text)  # plain text: formulas contain [ ] that rich would read as markup


def schemes(
    name: str = typer.Argument(None, help="show one scheme with its parameter descriptions (with --fidelity: one "
                                          "fidelity setting's fields)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    fidelity: bool = typer.Option(False, "--fidelity", help="list the named fidelity settings (--fidelity of "
                                  "`workbench train`) and the fields each sets, and the seeds' official-code options"),
) -> None:
    """List every registered positional-encoding scheme: where it acts, parameters, formula, source, extrapolation."""
    from workbench.model.pe import list_schemes

    if fidelity:  # NAME: one setting's fields
        rows = fidelity_rows()
        settings = list(dict.fromkeys(r["setting"] for r in rows))
        if name is not None and name not in settings:
            typer.echo(f"unknown fidelity setting {name!r} (with --fidelity, NAME is a setting); known: "
                       f"{', '.join(settings)}", err=True)
            raise typer.Exit(code=2)
        rows = [r for r in rows if name is None or r["setting"] == name]
        if as_json:
            typer.echo(json.dumps(rows, indent=2, default=repr))
            return
        table = Table(title="fidelity settings (docs/fidelity.md)", show_lines=False)
        for col in ("setting", "field", "value"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r["setting"], r["field"], Text(json.dumps(r["value"]) if not isinstance(r["value"], str)
                                                         else r["value"]))
        Console(width=max(Console().width, 160)).print(table)
        return

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
    if name is not None and rows[0]["train_defaults"]:
        console.print("training defaults (train.<field>, stored in config.json; --set wins)", style="bold")
        for k, d in rows[0]["train_defaults"].items():
            console.print(Text(f"  {k} = {d['value']!r}: {d['why']}"))


def register(app: typer.Typer) -> None:
    app.command("schemes")(schemes)
