"""After a lent GPU window, here: what its last call brought back (the device tool's `files_at` folder) into this
checkout, ready to commit (docs/training.md, "One GPU window", step 3). Nothing is committed; it says what changed.

    python benchmarks/window_back.py FILES_AT [--name h100-2026-11-28] [--no-compare]

1. results-paper.tgz: each run folder (members results/paper/RUN_ID/...) that results/paper lacks is copied there;
   one it holds with another manifest is left as it is and named (`workbench ship` refuses such a replacement
   too); then `workbench check results/paper`;
2. inductor-cache.tgz -> .inductor-cache.tgz (git-ignored; the next window carries it and unpacks it);
3. window.log, gpu_step.json and the logs of logs.tgz (sweep, ship, the detached job's, the check's) into
   benchmarks/measured/NAME/ (default: the card and today's date, UTC, with a letter added where that folder
   exists);
4. the check's `step_ms` folded into benchmarks/measured/step_ms.json, the planner's `--step-ms` (a table of one
   card: another card's figures replace it whole);
5. `workbench compare results/repro --readme README.md --figure ... --study-figure ...`: COMPARISON.md's paper-scale
   column, the README block and the findings figures (`--no-compare`: left for later).
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMPARE = ["compare", "results/repro", "--readme", "README.md", "--figure", "docs/img/findings_table1.png",
           "--study-figure", "docs/img/findings_study.png"]


def card_name(device: str | None) -> str | None:
    """'NVIDIA H100 80GB HBM3' -> 'h100' (the folder names of benchmarks/measured); None when none is named."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,3})\b", device or "")
    return m.group(1).lower() if m else None


def fresh_name(measured: Path, base: str) -> str:
    """`base`, or `base` + b, c, ... where benchmarks/measured already has that folder (two windows a day)."""
    for suffix in [""] + [chr(c) for c in range(ord("b"), ord("z") + 1)]:
        if not (measured / (base + suffix)).exists():
            return base + suffix
    raise SystemExit(f"benchmarks/measured has {base} to {base}z: name the folder (--name)")


def unpack_runs(tgz: Path, results: Path) -> tuple[list[str], list[str], list[str]]:
    """The run folders of a window's results-paper.tgz into `results`: (added, unchanged, differing ids)."""
    added, same, differ = [], [], []
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tgz) as t:
        t.extractall(tmp, filter="data")  # our own tarball, but never a path outside `tmp`
        for manifest in sorted(Path(tmp).rglob("manifest.json")):
            run = manifest.parent
            if run.name.startswith("."):  # a folder being shipped when it was packed (never packed since 11-27)
                continue
            dest = results / run.name
            if not dest.exists():
                shutil.copytree(run, dest)
                added.append(run.name)
            elif (dest / "manifest.json").read_bytes() == manifest.read_bytes():
                same.append(run.name)
            else:
                differ.append(run.name)
    return added, same, differ


def fold_step_ms(step_ms_path: Path, check: dict, name: str) -> dict:
    """The check's {scheme: compiled ms a step} into step_ms.json, which holds one card's table: {"device",
    "measured" (the benchmarks/measured folder of its latest figures), "step_ms"}."""
    old = json.loads(step_ms_path.read_text()) if step_ms_path.exists() else {}
    table = old.get("step_ms", {}) if old.get("device") == check["device"] else {}
    new = {"device": check["device"], "measured": name, "step_ms": table | check["step_ms"]}
    step_ms_path.write_text(json.dumps(new, indent=1) + "\n")
    return new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files_at", type=Path, help="the folder a window's last call brought back")
    ap.add_argument("--name", help="benchmarks/measured/NAME (default: card-date)")
    ap.add_argument("--no-compare", action="store_true", help="leave `workbench compare` for later")
    ap.add_argument("--results", type=Path, default=REPO / "results" / "paper")
    ap.add_argument("--measured", type=Path, default=REPO / "benchmarks" / "measured")
    ap.add_argument("--cache-tgz", type=Path, default=REPO / ".inductor-cache.tgz")
    a = ap.parse_args(argv)
    src = a.files_at
    if not src.is_dir() or not any(src.iterdir()):
        raise SystemExit(f"{src}: not a folder a window brought back (expected results-paper.tgz, logs.tgz, ...)")
    workbench = [sys.executable, "-m", "workbench"]
    rc = 0

    check = json.loads((src / "gpu_step.json").read_text()) if (src / "gpu_step.json").exists() else None
    added, same, differ = [], [], []
    if (src / "results-paper.tgz").exists():
        a.results.mkdir(parents=True, exist_ok=True)
        added, same, differ = unpack_runs(src / "results-paper.tgz", a.results)
        print(f"results: {len(added)} added ({', '.join(added) or 'none'}), {len(same)} unchanged")
        if differ:
            rc = 1
            print(f"left as they are, shipped here with another manifest: {', '.join(differ)} "
                  "(compare them; `workbench verify RUN_ID`)")
        if subprocess.run(workbench + ["check", str(a.results)], cwd=REPO).returncode:
            rc = 1
    if (src / "inductor-cache.tgz").exists():
        shutil.copyfile(src / "inductor-cache.tgz", a.cache_tgz)
        print(f"compile cache: {a.cache_tgz} ({a.cache_tgz.stat().st_size / 1e6:.1f} MB) for the next window")

    device = (check or {}).get("device")
    for rid in added + same + differ if device is None else []:  # no check: the card that trained the runs
        device = json.loads((a.results / rid / "run.json").read_text()).get("gpu") or device
    name = a.name or fresh_name(a.measured, f"{card_name(device) or 'gpu'}-{datetime.date.today().isoformat()}")
    folder = a.measured / name
    folder.mkdir(parents=True, exist_ok=True)
    for f in ("window.log", "gpu_step.json"):
        if (src / f).exists():
            shutil.copyfile(src / f, folder / f)
    if (src / "logs.tgz").exists():
        with tarfile.open(src / "logs.tgz") as t:
            t.extractall(folder, filter="data")
    print(f"measured: {folder} ({', '.join(sorted(p.name for p in folder.iterdir()))}); add its README.md")
    if check and check.get("step_ms"):
        new = fold_step_ms(a.measured / "step_ms.json", check, name)
        print(f"step_ms.json: {new['step_ms']} on {new['device']}")

    if added and not a.no_compare:
        rc |= subprocess.run(workbench + COMPARE, cwd=REPO).returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
