"""Shipping runs without their weights: a read-only results store (e.g. `results/repro/`) that anyone can open.

    ship_run(run, "results/repro")      # config.json, run.json, metrics.jsonl, tables.parquet, manifest.json
    refresh_tables("results/repro", run_id, {name: df}, provenance, record)  # tables recomputed from its weights
    bundle_shipped("results/repro")     # one-off: a shipped store's tables/*.parquet -> tables.parquet per run

A shipped run's tables are one compact file, `tables.parquet` (`bundle.py`: float32 values, byte-stream-split,
zstd 19), read by `run.load_table` / `run.tables()` like any table; the repository's shipped grid stays under its
30 MB budget with it (docs/store.md). `manifest.json` holds the sha256 of every shipped file (`manifest.py`): a
run whose bytes changed since is read as damaged, never silently.

A run trained from a tree with uncommitted changes (`code_version` ending in `-dirty`) is shipped only with the
diff it was trained with (`code.diff`, recorded at train time) or with `allow_dirty` = the reason, recorded in its
run.json as `dirty_allowed`.

Training is deterministic, so a shipped run is re-created from its config.json (`workbench recreate RUN_ID`)
and checked against the shipped metrics (`workbench verify RUN_ID`). A shipped folder replaces an older copy of
the same run (the new folder is written beside it and renamed into place), but not one shipped with other
metrics, a re-training, unless asked to (`replace`). The destination may not be, or lie
inside, the run's own store (shipping replaces the destination's folder of the run: it would delete the run).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from .atomic import atomic_write_bytes, atomic_write_json
from .bundle import BUNDLE, bundle_bytes, read_bundle_table
from .errors import StoreError
from .manifest import CODE_DIFF, write_manifest
from .run import CONFIG, INFO, METRICS, TABLES, Run, now_iso, parquet_provenance, same_training

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def is_dirty(info: dict) -> bool:
    """Whether a run.json's `code_version` says the run was trained from a tree with uncommitted code changes."""
    return str((info or {}).get("code_version") or "").endswith("-dirty")


def check_destination(source_root: str | os.PathLike, dest_root: str | os.PathLike) -> None:
    """StoreError when `dest_root` is, or lies inside, the store at `source_root` (or contains it): shipping
    there would replace or mix with the runs themselves."""
    if Path(dest_root).exists() and not Path(dest_root).is_dir():
        raise StoreError(f"cannot ship into {dest_root}: it is a file, not a folder; pass --to a results folder, e.g. "
                         "results/repro")
    src, dest = Path(source_root).resolve(), Path(dest_root).resolve()
    if dest == src or src in dest.parents or dest in src.parents:
        raise StoreError(f"cannot ship into {dest_root}: it is, lies inside or contains the run store {source_root} "
                         "(shipping replaces the destination's run folders, so the runs' weights and checkpoints "
                         "would be deleted); pass --to a separate results folder, e.g. results/repro")


def check_replacement(run: Run, dest_root: str | os.PathLike, replace: bool = False) -> bool:
    """Whether `dest_root` holds `run` shipped as the same model; StoreError when it holds it shipped with other
    metrics (unless `replace`: then False): then the run is a re-training of the shipped one (on a machine of other
    numerics the trajectory differs from the first step), and shipping it would replace the shipped results, not add
    tables to them. Metrics equal at every epoch but for their timings (`same_training`) are the same model: a re-training
    that was bit-identical ships over its copy, with its own record (run.json: where and when it was re-trained)."""
    copy = Path(dest_root) / run.id / METRICS
    if not copy.is_file():
        return False
    if copy.read_bytes() == (run.path / METRICS).read_bytes():
        return True
    try:
        shipped = [json.loads(line) for line in copy.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        shipped = None
    if shipped is not None and same_training(shipped, run.metric_rows()):
        return True
    if replace:
        return False
    try:
        old = json.loads((copy.parent / INFO).read_text())
    except (OSError, ValueError):
        old = {}

    def where(info):
        machine = info.get("machine") or {}
        return " ".join(str(v) for v in (info.get("code_version", "?"), "on", machine.get("cpu", "?"),
                                         machine.get("cpu_capability")) if v)

    raise StoreError(f"{dest_root} holds this run shipped with other metrics (trained at {where(old)}; this one at "
                     f"{where(run.info)}): a re-training, not the shipped run. `workbench verify` judges it; pass "
                     "--replace to overwrite the shipped results with it, or ship it to another folder", run.id)


def _aside(dest_root: str | os.PathLike, run_id: str) -> Path:
    """Where a re-ship moves the run's shipped copy while the new one goes in."""
    return Path(dest_root) / f".{run_id}.old"


def restore_aside(dest_root: str | os.PathLike, run_ids: str | list[str] | None = None) -> list[str]:
    """Put back `.<run id>.old` as `<run id>` where a re-ship was cut between its two renames (the copy shipped
    before moved aside, the new one not yet in place), for one run id, a list, or (None) every copy set aside in
    `dest_root`; the run ids put back."""
    root = Path(dest_root)
    if run_ids is None:
        run_ids = [p.name[1:-len(".old")] for p in root.glob(".*.old")]
    done = []
    for rid in [run_ids] if isinstance(run_ids, str) else run_ids:
        old, final = _aside(root, rid), root / rid
        if old.is_dir() and not final.exists():
            os.replace(old, final)
            done.append(rid)
    return done


def ship_run(run: Run, dest_root: str | os.PathLike, allow_dirty: str | None = None, replace: bool = False) -> Path:
    """Copy everything of a finished `run` but its weights and optimizer state into `dest_root/<run id>/`, its
    tables as one bundle, and a manifest of what was shipped. A run trained from a dirty tree needs its
    `code.diff`, or `allow_dirty` (the reason, recorded); a copy shipped with other metrics is replaced only with
    `replace` (`check_replacement`). Shipped over its copy of the same model, the copy's tables the run lacks (and
    its `refreshed` record) are kept: a re-ship adds tables, it never drops one."""
    if run.status != "finished":
        raise StoreError(f"is {run.status!r}; only finished runs are shipped", run.id)
    check_destination(run.store.root, dest_root)
    if run.metrics_changed():  # the shipped metrics would vouch for numbers no training wrote
        raise StoreError(f"its files are not what its training wrote ({METRICS} changed after training: its sha256 "
                         f"differs from the one in {INFO}): nothing shipped; restore it, or train the run again "
                         "(`--force`)", run.id)
    same_model = check_replacement(run, dest_root, replace)
    info = run.info
    has_diff = run.has_code_diff
    if is_dirty(info) and not has_diff and not allow_dirty:
        raise StoreError(f"was trained from a tree with uncommitted changes (code_version "
                         f"{info.get('code_version')}) and records no {CODE_DIFF}, so nobody could re-create it; "
                         "re-train it from a clean tree, or pass --allow-dirty REASON to ship it anyway "
                         "(the reason is recorded)", run.id)
    names = run.tables()
    tables = {name: run.load_table(name) for name in names}
    made = {name: run.provenance_of(name) for name in names}
    final = (info.get("weights") or {}).get("sha256")
    stale = {n: ((m or {}).get("weights") or {}) for n, m in made.items()}
    stale = {n: w.get("epoch") for n, w in stale.items() if final and w.get("sha256") not in (None, final)}
    if stale:  # computed from an earlier epoch's weights (an analysis of the run before it finished)
        raise StoreError(f"{', '.join(f'{n} (epoch {e})' for n, e in stale.items())} were made from earlier weights "
                         f"than its last (epoch {(info.get('weights') or {}).get('epoch')}): nothing shipped; make "
                         f"them again (`workbench analyze {run.id} --what {','.join(stale).replace('_', '-')}`)",
                         run.id)
    Path(dest_root).mkdir(parents=True, exist_ok=True)
    tmp = _staging(dest_root, run.id)
    for name in (CONFIG, METRICS) + ((CODE_DIFF,) if has_diff else ()):
        shutil.copy2(run.path / name, tmp / name)
    extra = {"dirty_allowed": allow_dirty} if is_dirty(info) and not has_diff else {}
    if same_model:  # the shipped copy's tables this run lacks, and its record of refreshed tables, stay
        copy = Run(_Readonly(dest_root), run.id)
        for name in copy.tables():
            if name not in tables:
                tables[name], made[name] = copy.load_table(name), copy.provenance_of(name)
        mine = list(info.get("refreshed") or [])
        refreshed = mine + [r for r in copy.info.get("refreshed") or [] if r not in mine]
        extra |= {"refreshed": refreshed} if refreshed else {}
    atomic_write_json(tmp / INFO, dict(info, shipped=now_iso(), weights_shipped=False, **extra))
    if tables:
        atomic_write_bytes(tmp / BUNDLE, bundle_bytes(tables, made))
    return _install(dest_root, run.id, tmp)


def _staging(dest_root: str | os.PathLike, run_id: str) -> Path:
    """An empty `.<run id>.shipping` folder in `dest_root` to build a run's new shipped folder in (a copy set aside
    by a re-ship that was cut is put back first, leftovers of one are removed)."""
    tmp = Path(dest_root) / f".{run_id}.shipping"
    restore_aside(dest_root, run_id)
    for leftover in (tmp, _aside(dest_root, run_id)):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir()
    return tmp


def _install(dest_root: str | os.PathLike, run_id: str, tmp: Path) -> Path:
    """Write `tmp`'s manifest and put it in place as the run's shipped folder: the old one is renamed aside, the
    new one into place, the old one deleted (a cut between the renames is undone by `restore_aside`)."""
    final, old = Path(dest_root) / run_id, _aside(dest_root, run_id)
    write_manifest(tmp)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def refresh_tables(dest_root: str | os.PathLike, run_id: str, tables: "dict[str, pd.DataFrame]",
                   provenance: dict[str, dict], record: dict) -> Path:
    """Replace tables of a shipped run by ones recomputed from its own weights (`workbench verify --refresh`: a
    re-training whose metrics equal the shipped ones at every epoch), keeping everything else as shipped: config,
    metrics and code diff byte for byte, the other tables with their provenance, run.json's training record, to
    which `record` is appended under `refreshed` (what, when, why). Refused, naming the file, where the shipped
    folder does not match its manifest; all or nothing (built beside it, renamed into place)."""
    from .manifest import verify_manifest

    folder = Path(dest_root) / run_id
    verify_manifest(folder, run_id)
    shipped = Run(_Readonly(dest_root), run_id)
    unknown = sorted(set(tables) - set(shipped.tables()))
    if unknown:
        raise StoreError(f"was not shipped with {', '.join(unknown)}: only shipped tables are refreshed", run_id)
    info = json.loads((folder / INFO).read_text())
    tmp = _staging(dest_root, run_id)
    for name in (CONFIG, METRICS, CODE_DIFF):
        if (folder / name).is_file():
            shutil.copy2(folder / name, tmp / name)
    atomic_write_json(tmp / INFO, dict(info, refreshed=[*info.get("refreshed", []), record]))
    names = shipped.tables()
    atomic_write_bytes(tmp / BUNDLE, bundle_bytes(
        {n: tables[n] if n in tables else shipped.load_table(n) for n in names},
        {n: provenance.get(n) if n in tables else shipped.provenance_of(n) for n in names}))
    return _install(dest_root, run_id, tmp)


def is_shipped(run: Run, dest_root: str | os.PathLike) -> bool:
    """True when `dest_root` holds a copy of `run` with every one of its tables (and maybe more: a re-ship keeps
    them) and nothing of the run changed since (its metrics and tables are not newer than the copy's run.json)."""
    copy = Path(dest_root) / run.id
    if not (copy / INFO).is_file():
        return False
    try:
        if not set(run.tables()) <= set(Run(_Readonly(dest_root), run.id).tables()):
            return False
    except StoreError:
        return False
    sources = [run.path / METRICS, *(run.path / TABLES).glob("*.parquet")]
    return max(p.stat().st_mtime for p in sources if p.exists()) <= (copy / INFO).stat().st_mtime


class _Readonly:
    """The least a `Run` handle needs of a store, for a destination folder that may not be a store yet."""

    readonly = True

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)


def bundle_run(path: str | os.PathLike) -> tuple[int, int]:
    """Convert one shipped run folder's `tables/*.parquet` into `tables.parquet`, in place; (bytes before, after).

    All or nothing: the bundle is written to a temp file and checked (every table reads back equal, dtypes
    included) before it is renamed into place; only then is `tables/` renamed aside and deleted. At every instant
    the run reads complete and equal: first from `tables/`, then from both (the same tables), then from the
    bundle. Running it again finishes an interrupted conversion."""
    import pandas as pd

    folder = Path(path)
    tables, bundle, aside = folder / TABLES, folder / BUNDLE, folder / f".{TABLES}.old"
    shutil.rmtree(aside, ignore_errors=True)
    files = sorted(tables.glob("*.parquet")) if tables.is_dir() else []
    if not files:
        if tables.is_dir() and bundle.exists():
            shutil.rmtree(tables)
        return 0, bundle.stat().st_size if bundle.exists() else 0
    try:
        frames = {p.stem: pd.read_parquet(p) for p in files}
        provenance = {p.stem: parquet_provenance(p) for p in files}
    except Exception as e:
        raise StoreError(f"a table does not read ({e}); nothing converted", folder.name) from None
    data = bundle_bytes(frames, provenance)
    check = folder / f".{BUNDLE}.check"
    try:
        check.write_bytes(data)
        for name, df in frames.items():
            pd.testing.assert_frame_equal(read_bundle_table(check, name), df, check_exact=True)
    except AssertionError as e:
        raise StoreError(f"the bundle does not read back equal ({e}); nothing converted", folder.name) from None
    finally:
        check.unlink(missing_ok=True)
    before = sum(p.stat().st_size for p in files)
    atomic_write_bytes(bundle, data)
    os.replace(tables, aside)
    shutil.rmtree(aside)
    return before, len(data)


def bundle_shipped(root: str | os.PathLike, log=print) -> tuple[int, int]:
    """`bundle_run` on every run folder of a shipped store; (bytes of tables before, after)."""
    from .runstore import RUN_ID_PATTERN

    total = [0, 0]
    folders = sorted(p for p in Path(root).iterdir() if p.is_dir() and RUN_ID_PATTERN.match(p.name))
    for folder in folders:  # a store you train into is not converted: its runs' tables are its analyses' own
        try:
            shipped = json.loads((folder / "run.json").read_text()).get("shipped")
        except (OSError, ValueError, AttributeError):
            shipped = None
        if (folder / "config.json").exists() and not shipped:
            raise StoreError(f"{root} is not a shipped store: run {folder.name} was never shipped (its run.json has "
                             "no `shipped`); pass a results store that `workbench ship` filled, e.g. results/repro",
                             folder.name)
    for folder in folders:
        before, after = bundle_run(folder)
        total[0] += before
        total[1] += after
        if before:
            log(f"{folder.name}: tables {before / 1e3:.0f} kB -> {after / 1e3:.0f} kB")
    return total[0], total[1]
