"""Shipping runs without their weights: a read-only results store (e.g. `results/repro/`) that anyone can open.

    ship_run(run, "results/repro")      # config.json, run.json, metrics.jsonl, tables/*.parquet; no weights

Tables are re-written compactly (`parquet_bytes(..., compact=True)`: float32 values, zstd, no statistics), so a
fully analysed run takes about 180 KB and the whole reproduction grid stays under the 30 MB budget.

Training is deterministic, so a shipped run is re-created from its config.json (`workbench recreate RUN_ID`)
and checked against the shipped metrics (`workbench verify RUN_ID`). A shipped folder replaces an older copy of
the same run atomically: the new folder is written beside it and renamed into place.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from .atomic import atomic_write_json
from .errors import StoreError
from .run import CONFIG, INFO, METRICS, TABLES, Run, now_iso, parquet_bytes


def ship_run(run: Run, dest_root: str | os.PathLike) -> Path:
    """Copy everything of a finished `run` but its weights and optimizer state into `dest_root/<run id>/`."""
    if run.status != "finished":
        raise StoreError(f"is {run.status!r}; only finished runs are shipped", run.id)
    dest_root = Path(dest_root)
    dest_root.mkdir(parents=True, exist_ok=True)
    final, tmp, old = dest_root / run.id, dest_root / f".{run.id}.shipping", dest_root / f".{run.id}.old"
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir()
    for name in (CONFIG, METRICS):
        shutil.copy2(run.path / name, tmp / name)
    atomic_write_json(tmp / INFO, dict(run.info, shipped=now_iso(), weights_shipped=False))
    if (run.path / TABLES).is_dir():
        (tmp / TABLES).mkdir()
        for name in run.tables():
            (tmp / TABLES / f"{name}.parquet").write_bytes(parquet_bytes(run.load_table(name), compact=True))
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def is_shipped(run: Run, dest_root: str | os.PathLike) -> bool:
    """True when `dest_root` holds a copy of `run` with every one of its tables and nothing of the run changed
    since (its metrics and tables are not newer than the copy's run.json)."""
    copy = Path(dest_root) / run.id
    if not (copy / INFO).is_file():
        return False
    have = sorted(p.stem for p in (copy / TABLES).glob("*.parquet")) if (copy / TABLES).is_dir() else []
    if have != run.tables():
        return False
    sources = [run.path / METRICS, *(run.path / TABLES).glob("*.parquet")]
    return max(p.stat().st_mtime for p in sources if p.exists()) <= (copy / INFO).stat().st_mtime

