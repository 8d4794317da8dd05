"""A shipped run proves its bytes: `manifest.json` holds the sha256 and size of every file `ship` wrote.

    write_manifest(folder)          # `ship_run` does this last, before the folder is renamed into place
    manifest_problems(folder)       # [] or ["tables.parquet changed since it was shipped", ...]
    verify_manifest(folder, run_id) # StoreError "damaged: FILE changed since it was shipped"

The manifest covers config.json, run.json (the whole file, its `shipped` timestamp included: `ship` writes both
at once), metrics.jsonl, tables.parquet and code.diff, whichever the run has. Files not listed (a `tables/` folder,
weights in a user's copy) are not covered. A run without a manifest is read as before (runs shipped before
manifests existed; `workbench check` names them). Hashes are cached per folder by the files' (inode, size,
mtime, ctime), so a page that reads a run many times hashes it once per change.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .atomic import atomic_write_json, stat_key
from .bundle import BUNDLE
from .errors import StoreError

MANIFEST = "manifest.json"
CODE_DIFF = "code.diff"
TABLES = "tables"  # a run's folder of one parquet file a table (a shipped run holds them in its BUNDLE instead)
SHIPPED_FILES = ("config.json", "run.json", "metrics.jsonl", BUNDLE, CODE_DIFF)
FORMAT = 1
_CACHE: dict[str, tuple[tuple, list[str]]] = {}  # folder -> (stat key of its files, problems)


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_of(folder: str | os.PathLike) -> dict:
    """{"format", "files": {name: {"sha256", "bytes"}}} of the shipped files present in `folder`."""
    folder = Path(folder)
    files = {name: {"sha256": sha256_file(folder / name), "bytes": (folder / name).stat().st_size}
             for name in SHIPPED_FILES if (folder / name).is_file()}
    return {"format": FORMAT, "algorithm": "sha256", "files": files}


def write_manifest(folder: str | os.PathLike) -> Path:
    """Write `folder/manifest.json` for the files as they are now (atomically)."""
    return atomic_write_json(Path(folder) / MANIFEST, manifest_of(folder))


def has_manifest(folder: str | os.PathLike) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def _stat_key(folder: Path) -> tuple | None:
    """The `stat_key` of each shipped file (None for a missing one); None while any may still change unseen."""
    key = [("tables/", (folder / TABLES).is_dir())]  # an unlisted tables/ folder is damage too (`_problems`)
    for name in (MANIFEST, *SHIPPED_FILES):
        try:
            k = stat_key(folder / name)
        except OSError:
            key.append((name, None))
            continue
        if k is None:
            return None
        key.append((name, *k))
    return tuple(key)


def manifest_problems(folder: str | os.PathLike) -> list[str]:
    """What differs from `folder`'s manifest, one line per file ([] when every listed file is as shipped, or when
    there is no manifest)."""
    folder = Path(folder)
    key = _stat_key(folder)
    cached = _CACHE.get(str(folder))
    if key is not None and cached is not None and cached[0] == key:
        return list(cached[1])
    problems = _problems(folder)
    if key is not None:
        _CACHE[str(folder)] = (key, problems)
    return list(problems)


def _problems(folder: Path) -> list[str]:
    path = folder / MANIFEST
    if not path.exists():
        return []
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict) or not all(isinstance(v, dict) and isinstance(v.get("sha256"), str)
                                                  for v in files.values()):
            raise ValueError("'files' must map names to {sha256, bytes}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"{MANIFEST} is unreadable ({type(e).__name__}: {e})"]
    problems = []
    for name, want in sorted(files.items()):
        p = folder / name
        if name not in SHIPPED_FILES:
            problems.append(f"{MANIFEST} lists {name!r}, which is not a shipped file")
        elif not p.is_file():
            problems.append(f"{name} is missing (it was shipped)")
        elif p.stat().st_size != want.get("bytes", p.stat().st_size) or sha256_file(p) != want["sha256"]:
            problems.append(f"{name} changed since it was shipped")
    for name in SHIPPED_FILES:
        if name not in files and (folder / name).is_file():
            problems.append(f"{name} was not shipped (it is not in {MANIFEST})")
    if (folder / TABLES).is_dir():  # a run's tables/ would be read before its checked bundle
        problems.append(f"{TABLES}/ was not shipped (a shipped run's tables are its {BUNDLE}, in {MANIFEST})")
    return problems


def verify_manifest(folder: str | os.PathLike, run_id: str) -> None:
    """StoreError "damaged: FILE changed since it was shipped" naming the first problem (and how many more)."""
    problems = manifest_problems(folder)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise StoreError(f"damaged: {problems[0]}{more}; restore the run folder (for the repository's results: "
                         f"`git checkout -- results/repro/{run_id}`) or ship the run again", run_id,
                         problems[0].split(" ", 1)[0])


def check_store(root: str | os.PathLike, write_missing: bool = False) -> tuple[dict[str, list[str]], list[str]]:
    """Every run folder of a shipped store against its manifest: ({run id: problems} for the runs that differ or
    have no manifest, [run ids checked]). `write_missing`: write a manifest for each run that has none (trusting
    its bytes as they are now) instead of counting it as a problem. A folder with neither config.json nor a
    manifest is not a run's (`results/` holds stores, not runs) and is not counted."""
    from .runstore import RUN_ID_PATTERN

    root = Path(root)
    if not root.is_dir():
        raise StoreError(f"{root} is not a folder: pass a shipped results store, e.g. results/repro")
    bad, ids = {}, sorted(p.name for p in root.iterdir() if p.is_dir() and RUN_ID_PATTERN.match(p.name)
                          and ((p / "config.json").exists() or has_manifest(p)))  # a run's folder, not a store's
    for left in sorted(root.glob(".*.old")) + sorted(root.glob(".*.shipping")):  # a (re-)ship cut short
        rid = left.name[1:].rsplit(".", 1)[0]
        bad.setdefault(rid, []).append(
            f"{left.name} is left from a ship cut short" + (f" (the copy shipped before, set aside; `{rid}/` is "
                                                          "missing: ship the run again, or rename it back)"
                                                          if left.suffix == ".old" and not (root / rid).exists()
                                                          else ": ship the run again (it is removed then)"))
    for rid in ids:
        folder = root / rid
        if not has_manifest(folder):
            if write_missing:
                write_manifest(folder)
            else:
                bad[rid] = [f"no {MANIFEST}: its files cannot be checked (ship it again, or `workbench check "
                            f"--write-missing` to record them as they are)"]
            continue
        problems = manifest_problems(folder)
        if problems:
            bad[rid] = problems
    return bad, ids
