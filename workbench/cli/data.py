"""`workbench data make|show`: generate, cache and inspect the synthetic datasets."""
import json
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.json import JSON
from rich.table import Table

import synthetic_tasks as st

data_app = typer.Typer(help="Synthetic datasets: generate, cache, inspect.", no_args_is_help=True)
_BARS = "▁▂▃▄▅▆▇█"


def sparkline(hist, width=32):
    """Unicode sparkline of a histogram, binned down to at most `width` bars."""
    hist = list(hist)
    if not hist or max(hist) == 0:
        return ""
    k = -(-len(hist) // width)
    bins = [sum(hist[i:i + k]) for i in range(0, len(hist), k)]
    top = max(bins)
    return "".join(" " if b == 0 else _BARS[min(len(_BARS) - 1, b * len(_BARS) // (top + 1))] for b in bins)


def summary_table(ds):
    """rich Table summarising a `synthetic_tasks.Dataset`: one row per split, metadata in the caption."""
    m, s = ds.manifest, ds.spec
    t = Table(title=f"{ds.task}  (preset {s.preset}, seed {s.seed})", title_justify="left")
    for col in ("split", "examples", "padded len", "max real len", "labels", "label histogram"):
        t.add_column(col, justify="left" if col in ("split", "label histogram") else "right")
    for name, info in m["splits"].items():
        t.add_row(name, f"{info['n']:,}", str(info["seq_len"]), str(info["max_real_len"]),
                  f"{info['label_min']}..{info['label_max']}", sparkline(info["label_hist"]))
    trig = ", ".join(f"w{i}" for i in ds.trigger_ids)
    t.caption = (f"vocab_size {ds.vocab_size} | seq_len {ds.seq_len} | n_classes {ds.n_classes} | "
                 f"duplicates removed {m['n_duplicates_removed']} of {m['n_generated']:,}\n"
                 f"triggers: {trig}\nhash {ds.hash[:16]}  path {ds.path or '(in memory)'}")
    t.caption_justify = "left"
    return t


def _parse_sets(items):
    out = {}
    for item in items or []:
        key, eq, val = item.partition("=")
        if not eq:
            raise typer.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="--set")
        try:
            out[key.strip()] = json.loads(val)
        except json.JSONDecodeError:
            out[key.strip()] = val
    return out


@data_app.command()
def make(task: str = typer.Option("trigger-distance", "--task", "-t", help=f"{' | '.join(st.TASKS)} | all"),
         preset: str = typer.Option("cpu", "--preset", "-p", help=" | ".join(st.PRESETS)),
         seed: int = typer.Option(42, "--seed", "-s"),
         out: str = typer.Option(None, "--out", "-o", help="cache folder (default $PELAB_DATA or ./data_cache)"),
         set_: list[str] = typer.Option(None, "--set", help="override a spec field, e.g. --set middle_max=30"),
         force: bool = typer.Option(False, "--force", help="regenerate even if cached")):
    """Generate (or reuse from the cache) a dataset and print its summary."""
    console = Console()
    tasks = list(st.TASKS) if task == "all" else [task]
    try:
        specs = [st.get_spec(t, preset=preset, seed=seed, **_parse_sets(set_)) for t in tasks]
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    from workbench.train.presets import check_dataset_memory

    if out and Path(out).exists() and not Path(out).is_dir():
        raise typer.BadParameter(f"{out} is a file, not a folder: pass --out a cache folder (or leave it out)")

    for spec in specs:
        check_dataset_memory(spec)  # before allocating: a clear error, not a MemoryError
    for spec in specs:
        ds = st.load_or_generate(spec, out, force=force)
        console.print(summary_table(ds))


@data_app.command()
def show(path: str = typer.Argument(..., help="dataset folder (or its manifest.json)"),
         n: int = typer.Option(5, "--n", "-n", min=0, help="examples to decode"),
         split: str = typer.Option("test", "--split", help="train | test | an extrapolation split"),
         raw: bool = typer.Option(False, "--json", help="print the whole manifest as JSON")):
    """Print a cached dataset's manifest and a few decoded examples (the content hash is verified)."""
    console = Console()
    folder = os.path.dirname(path) if path.endswith(".json") else path
    try:
        ds = st.load_dataset(folder)
    except st.CacheError as e:
        raise ValueError(str(e)) from None  # `error: ...`, exit 2 (the command group)
    m = ds.manifest
    if raw:
        console.print(JSON(json.dumps(m)))
    else:
        meta = Table(show_header=False, title="manifest", title_justify="left")
        for k in ("task", "preset", "seed", "hash", "generator_version", "numpy_version", "created", "trigger_ids"):
            meta.add_row(k, str(m.get(k)))
        meta.add_row("spec", json.dumps(m["spec"]))
        console.print(meta)
    console.print(summary_table(ds))
    splits = ds.splits()
    if split not in splits:
        raise ValueError(f"split {split!r} not in {list(splits)}")
    x, y = splits[split]
    ex = Table(title=f"{split}: first {min(n, len(y))} examples", title_justify="left")
    ex.add_column("label", justify="right")
    ex.add_column("tokens (triggers as [T:w..])")
    for i in range(min(n, len(y))):
        ex.add_row(str(int(y[i])), ds.decode(x[i]))
    console.print(ex)


def register(app):
    app.add_typer(data_app, name="data")
