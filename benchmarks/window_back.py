"""After a lent GPU window, here: what its last call brought back (the device tool's `files_at` folder) into this
checkout, ready to commit (docs/training.md, "One GPU window", step 3). Nothing is committed; it says what changed.

    python benchmarks/window_back.py FILES_AT [--first FILES_AT_OF_CALL_1] [--name h100-2026-11-28] [--no-compare]

1. results-paper.tgz: each run folder (members results/paper/RUN_ID/...) that results/paper lacks is copied there;
   one it holds with another manifest is left as it is and named (`workbench ship` refuses such a replacement
   too); then `workbench check results/paper`. With `--first` (two calls), the first call's results-paper.tgz too,
   after the last call's: a run the last call did not bring back (a fresh machine for call 2, or call 2 cut off) is
   still kept; one both brought is the last call's (call 1's may be its first ship, before the THEN_TABLES
   re-ship). An archive cut off mid-write is named and left out, never half-merged;
2. inductor-cache.tgz (Triton's compiled kernels) -> benchmarks/kernels/triton.tgz, with triton.json beside it (the
   window, card, torch, size, sha256): tracked, so every later checkout has it and each call carries it with the
   tree (a new checkout used to lose it and compile cold); refused, naming the sizes, where the tracked files, .whl/
   and it would pass what one call may carry (`window_size.LIMIT_MIB`: tracked and untracked files, .whl/); the
   first call's where the last brought none;
3. runs-paper-meta.tgz (every run's metrics, unfinished ones too; up to 2 MB), the logs of logs.tgz (sweep, ship,
   the detached job's window.log as job-window.log, the check's), each call's own window.log (window.log;
   `--first`: the first call's as window-call1.log) and gpu_step.json
   into benchmarks/measured/NAME/ (default: the card and today's date, UTC, with a letter added where that folder
   exists), with a draft README.md where it has none (`draft_readme`: the card, the code, the runs added with their
   epochs, times and accuracies, what the sweep left, the spare-time step measurement);
4. the check's `step_ms`, then that of the job's spare-time measurement (logs.tgz's spare_step.json), folded into
   benchmarks/measured/step_ms.json, the planner's `--step-ms` (a table of one
   card: on another card, the schemes the check did not time keep the old card's figures scaled by the ratio on
   those it did, and say so under "filled");
5. `workbench compare results/repro --readme README.md --figure ... --study-figure ...`: COMPARISON.md's paper-scale
   column, the README block and the findings figures; then `workbench compare results/paper`, the GPU runs' own
   COMPARISON.md (`--no-compare`: both left for later).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from window_size import LIMIT_MIB, travel_bytes  # noqa: E402  (beside this script)
from workbench.store import RunStore  # noqa: E402  (the only code that knows a run's files)

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "benchmarks" / "kernels" / "triton.tgz"
META_KEEP_BYTES = 2_000_000  # runs-paper-meta.tgz is kept in the measured folder up to this size
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


def unpack_runs(tgz: Path, results: Path, newer: set[str] = frozenset()) -> tuple[list[str], list[str], list[str]]:
    """The run folders of a window's results-paper.tgz into `results`: (added, unchanged, differing ids). `newer`:
    runs a later call of the window brought back (left as that call shipped them). A cut-off archive raises
    tarfile.TarError (or EOFError) before anything is copied."""
    added, same, differ = [], [], []
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tgz) as t:
        t.extractall(tmp, filter="data")  # our own tarball, but never a path outside `tmp`
        for manifest in sorted(Path(tmp).rglob("manifest.json")):
            run = manifest.parent
            if run.name.startswith(".") or run.name in newer:  # a folder being shipped when it was packed (never
                continue  # packed since 11-27), or the later call's
            dest = results / run.name
            if not dest.exists():
                shutil.copytree(run, dest)
                added.append(run.name)
            elif (dest / "manifest.json").read_bytes() == manifest.read_bytes():
                same.append(run.name)
            else:
                differ.append(run.name)
    return added, same, differ


def spare_step(path: Path) -> dict | None:
    """The step measurement a window's job made in the time its sweep left (gpu_window.sh SPARE, in logs.tgz), or
    None where there is none or it was cut off mid-write (its time was up)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def runs_table(results: Path, run_ids: list[str]) -> list[str]:
    """A markdown table of the runs a window added, from their shipped metrics: epochs, wall time, the first epoch
    (compilation included) and the median of the others (each with its test evaluation), the last test and training
    accuracy, and how far the test accuracy moved over the second half (the registered run rules' window)."""
    from workbench.train.sweep import epoch_seconds, fmt_time  # the planner's own epoch time and its format

    store = RunStore(results, readonly=True)
    lines = ["| run | epochs | wall | first epoch's wall (set-up, compile) | median epoch (with its test evaluation) | "
             "test accuracy | training accuracy | test accuracy, epoch E/2 -> E |", "|---|---|---|---|---|---|---|---|"]
    for rid in run_ids:
        run = store.get(rid)
        rows, info = run.metric_rows(), run.info
        if not rows:
            lines.append(f"| `{rid}` | 0 | – | – | – | – | – | – |")
            continue
        half = rows[max(1, len(rows) // 2) - 1]["test_acc"]
        median = f"{epoch_seconds(rows):.2f} s" if len(rows) > 1 else "–"
        lines.append(f"| `{rid}` | {len(rows)} | {fmt_time(info.get('wall_time_s') or rows[-1]['wall_s'])} | "
                     f"{rows[0]['wall_s']:.1f} s | {median} | {100 * rows[-1]['test_acc']:.2f} % | "
                     f"{100 * rows[-1]['train_acc']:.2f} % | {100 * (rows[-1]['test_acc'] - half):+.1f} points |")
    return lines


def analysis_lines(ship_log: str) -> list[str]:
    """The ship's analyses in the window (its log's "RUN TABLE: ran in Xs" lines, `analysis.suite.run_suite`), a
    line per table: the runs, the median and the range of seconds, in the order they first ran; the head ablations
    ran on the GPU, the rest (THEN_TABLES) on the host's CPU."""
    times: dict[str, list[float]] = {}
    for m in re.finditer(r"^\S+ (\w+): ran in ([0-9.]+)s$", ship_log, re.M):
        times.setdefault(m.group(1), []).append(float(m.group(2)))
    return [f"- {t}: {statistics.median(v):.1f} s ({len(v)} run{'s' if len(v) > 1 else ''}, "
            f"{min(v):.1f}-{max(v):.1f} s)" for t, v in times.items()]


def draft_readme(folder: Path, results: Path, added: list[str], device: str | None, torch_version: str | None,
                 spare: dict | None) -> str:
    """What `window_back` knows of a window, as the start of its benchmarks/measured README: the card, the code,
    the runs it added (`runs_table`), the sweep's last word and what it left, and the spare-time step measurement.
    The device time, the commands and what the figures mean are the developer's to add."""
    store = RunStore(results, readonly=True)
    versions = sorted({store.get(r).info.get("code_version") for r in added} - {None})
    out = [f"# The lent {device or 'GPU'} window `{folder.name}` (a draft by window_back.py: add the device time, "
           "the commands, and what the figures mean)", "",
           f"Machine: {device or 'not named'}, torch {torch_version or 'not named'}. Code: "
           f"{', '.join(versions) or 'no run added'}.", "", f"## The runs it added ({len(added)})", ""]
    out += runs_table(results, added) if added else ["None."]
    sweep = folder / "sweep.log"
    if sweep.exists():
        said = sweep.read_text().splitlines()
        done = [x for x in said if x.startswith("sweep done")]
        left = [re.sub(r"\s+left for the next window \((about \S+) to finish.*", r" (\1)", x.split("]", 1)[-1].strip())
                for x in said if "left for the next window" in x]
        out += ["", "## The sweep", ""] + [f"- {x}" for x in done[-1:]]
        out += [f"- left for the next window ({len(left)}): {', '.join(left)}"] if left else []
    ship = folder / "ship.log"
    timed = analysis_lines(ship.read_text()) if ship.exists() else []
    if timed:
        out += ["", "## The analyses before each ship (ship.log)", ""] + timed
    if spare and spare.get("step"):
        out += ["", "## The step measurement in the time the sweep left (spare_step.json)", ""]
        out += [f"- {k}: eager {r['eager_ms']:.2f} ms, compiled {r['compiled_ms']:.2f} ms "
                f"(batch {r.get('batch_size')}; compile {r.get('compiled_warmup_s', float('nan')):.1f} s)"
                for k, r in spare["step"].items() if "compiled_ms" in r]
        if "mla_over_rope" in spare:
            out.append(f"- MLA's compiled step over RoPE's: {spare['mla_over_rope']:.2f}x")
        out += [triton_line(spare)] if "triton" in spare.get("sdpa", {}) else []
        prof = spare.get("profile") or {}
        out += [f"- profile of {prof['scheme']}'s compiled step: {prof['total_ms_per_step']:.2f} ms of kernels a "
                "step; " + "; ".join(f"{t['name'][:60]} {t['share']:.0%}" for t in prof["top"][:5])] if prof else []
    return "\n".join(out) + "\n"


def triton_line(check: dict) -> str:
    """A check's `sdpa.triton` (PE-Lab's attention kernel, gpu_step.py) in a line: its agreement with SDPA, the
    attention alone against SDPA's, then its eager and compiled RoPE steps against the same process's SDPA steps."""
    r, rope = check["sdpa"]["triton"], check.get("step", {}).get("rope", {})
    if "error" in r:
        return f"- the Triton attention kernel failed: {r['error']}"
    agree = r.get("agree", {})  # one dict per shape, beside `ok` and `tuned` (the autotuner's choices)
    shapes = {k: v for k, v in agree.items() if isinstance(v, dict) and "triton_err" in v}
    errs = "; ".join(f"{k}: kernel {max(v['triton_err']):.2g}, SDPA {max(v['sdpa_err']):.2g}"
                     for k, v in shapes.items())
    by = f" (Triton {check['triton']})" if check.get("triton") else ""
    line = f"- the Triton attention kernel{by}: agreement with SDPA {'ok' if agree.get('ok') else 'FAILED'} ({errs})"
    ops = "; ".join(f"{k}: {v['op_ms']['triton']:.3f} against SDPA's {v['op_ms']['sdpa']:.3f} ms"
                    + (f" at attention dropout {v['op_dropout']:g}" if v.get("op_dropout") else "")
                    + (f" ({v['op_ms_p0']['triton']:.3f} against {v['op_ms_p0']['sdpa']:.3f} without)"
                       if "op_ms_p0" in v else "")
                    for k, v in shapes.items() if "op_ms" in v)
    line += f"; attention alone, forward + backward: {ops}" if ops else ""
    for mode, key in (("eager", "eager_ms"), ("compiled", "compiled_ms")):
        if mode in r:
            line += f"; {mode} RoPE step {r[mode]:.2f} ms" + (
                f" against SDPA's {rope[key]:.2f} ms ({rope[key] / r[mode]:.2f}x)" if key in rope else "")
    return line


def keep_kernels(tgz: Path, dest: Path, provenance: dict, limit_mib: float = LIMIT_MIB) -> str:
    """A window's inductor-cache.tgz to `dest` (tracked: benchmarks/kernels/triton.tgz) and its provenance to
    dest.with_suffix('.json'), unless the calls would then carry more than `limit_mib` (tracked files, .whl/ and the
    kernels): then nothing is changed and the message says so. Returns what it did, in a line."""
    size, rest = tgz.stat().st_size, travel_bytes(REPO, leave_out=dest)
    if rest + size > limit_mib * 2 ** 20:
        return (f"compile cache NOT kept: {size / 2 ** 20:.1f} MiB beside the {rest / 2 ** 20:.1f} MiB a call carries "
                f"already (tracked files and .whl/) passes the {limit_mib:g} MiB a call may carry; {dest} is left as "
                "it was (the next window compiles what it lacks)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tgz, dest)
    info = provenance | {"bytes": size, "sha256": hashlib.sha256(dest.read_bytes()).hexdigest()}
    dest.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    return (f"compile cache: {dest} ({size / 1e6:.1f} MB; {(rest + size) / 2 ** 20:.1f} MiB a call carries now): "
            "commit it")


def fold_step_ms(step_ms_path: Path, check: dict, name: str) -> dict:
    """The check's {scheme: compiled ms a step} into step_ms.json, which holds one card's table: {"device",
    "measured" (the benchmarks/measured folder of its latest figures), "step_ms", "filled"}. On the same card the
    check's figures replace those they time; on another card the old card's figures of the schemes the check did not
    time stay, scaled by the ratio on those it did (`sweep.fill_step_ms`), and "filled" says how."""
    from workbench.train.sweep import fill_step_ms

    old = json.loads(step_ms_path.read_text()) if step_ms_path.exists() else {}
    if old.get("device") == check["device"]:
        table, filled = old.get("step_ms", {}) | check["step_ms"], old.get("filled", {})
        filled = {s: how for s, how in filled.items() if s not in check["step_ms"]}
    else:
        table, filled = fill_step_ms(check["step_ms"], old.get("step_ms", {}), estimated=old.get("filled", {}))
        where = f"{old.get('device')} ({old.get('measured')})"
        filled = {s: f"{how}, from {where}" for s, how in filled.items()}
    new = {"device": check["device"], "measured": name, "step_ms": table} | ({"filled": filled} if filled else {})
    step_ms_path.write_text(json.dumps(new, indent=1) + "\n")
    return new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files_at", type=Path, help="the folder a window's last call brought back")
    ap.add_argument("--first", type=Path, help="the folder the window's first call brought back (two calls): its "
                    "runs that the last call lacks are kept too, its window.log as window-call1.log")
    ap.add_argument("--name", help="benchmarks/measured/NAME (default: card-date)")
    ap.add_argument("--no-compare", action="store_true", help="leave `workbench compare` for later")
    ap.add_argument("--results", type=Path, default=REPO / "results" / "paper")
    ap.add_argument("--measured", type=Path, default=REPO / "benchmarks" / "measured")
    ap.add_argument("--kernels", type=Path, default=KERNELS, help="where the compile cache is kept (tracked)")
    a = ap.parse_args(argv)
    src = a.files_at
    if not src.is_dir() or not any(src.iterdir()):
        raise SystemExit(f"{src}: not a folder a window brought back (expected results-paper.tgz, logs.tgz, ...)")
    workbench = [sys.executable, "-m", "workbench"]
    rc = 0

    calls = [src] + ([a.first] if a.first is not None and a.first.is_dir() else [])  # the last call first
    check = next((c for c in (spare_step(f / "gpu_step.json") for f in calls) if c), None)
    added, same, differ = [], [], []
    if not (src / "results-paper.tgz").exists():
        print(f"{src} has no results-paper.tgz (the call was cut off, or found no job on a fresh machine)"
              + ("; the first call's runs are kept" if len(calls) > 1 else ""))
    for call in calls:
        if not (call / "results-paper.tgz").exists():
            continue
        a.results.mkdir(parents=True, exist_ok=True)
        try:
            new, kept, other = unpack_runs(call / "results-paper.tgz", a.results, newer=set(added + same + differ))
        except (tarfile.TarError, EOFError, OSError) as e:  # cut off mid-write: nothing of it is merged
            print(f"{call / 'results-paper.tgz'} cannot be read ({type(e).__name__}: {e}): left out")
            rc = 1
            continue
        added, same, differ = added + new, same + kept, differ + other
        print(f"results from {call}: {len(new)} added ({', '.join(new) or 'none'}), {len(kept)} unchanged")
    if differ:
        rc = 1
        print(f"left as they are, shipped here with another manifest: {', '.join(differ)} "
              "(compare them; `workbench verify RUN_ID`)")
    if any((c / "results-paper.tgz").exists() for c in calls):
        if subprocess.run(workbench + ["check", str(a.results)], cwd=REPO).returncode:
            rc = 1

    device, torch_version = (check or {}).get("device"), (check or {}).get("torch")
    # no check: the card that trained this window's runs (or of those shipped before unchanged, without any; a run
    # shipped here with another manifest is not the window's run)
    for rid in (added or same) if device is None else []:
        info = RunStore(a.results, readonly=True).get(rid).info
        device, torch_version = info.get("gpu") or device, info.get("torch_version") or torch_version
    name = a.name or fresh_name(a.measured, f"{card_name(device) or 'gpu'}-{datetime.date.today().isoformat()}")
    cache = next((c / "inductor-cache.tgz" for c in calls if (c / "inductor-cache.tgz").exists()), None)
    if cache is not None:
        where = {"window": name, "device": device, "torch": torch_version}
        print(keep_kernels(cache, a.kernels, where))
    folder = a.measured / name
    folder.mkdir(parents=True, exist_ok=True)
    for call in calls[::-1]:  # the first call's logs, then the last's over them (its logs.tgz holds all of the job's)
        if not (call / "logs.tgz").exists():
            continue
        try:
            with tarfile.open(call / "logs.tgz") as t:
                t.extractall(folder, filter="data")
        except (tarfile.TarError, EOFError, OSError) as e:
            print(f"{call / 'logs.tgz'} cannot be read whole ({type(e).__name__}: {e}): what it held before the cut "
                  "is kept")
        if (folder / "window.log").exists():  # the detached job's own log (logs/window.log), not a call's
            (folder / "window.log").replace(folder / "job-window.log")
    for f in ("window.log", "gpu_step.json"):
        if (src / f).exists():
            shutil.copyfile(src / f, folder / f)
    if len(calls) > 1 and (a.first / "window.log").exists():
        shutil.copyfile(a.first / "window.log", folder / "window-call1.log")
    meta = next((c / "runs-paper-meta.tgz" for c in calls if (c / "runs-paper-meta.tgz").exists()), None)
    if meta is not None and meta.stat().st_size <= META_KEEP_BYTES:  # the metrics of every run the window started,
        shutil.copyfile(meta, folder / meta.name)  # the unfinished and the stopped ones too (no weights)
    spare = spare_step(folder / "spare_step.json")
    if not (folder / "README.md").exists():
        (folder / "README.md").write_text(draft_readme(folder, a.results, added, device, torch_version, spare))
    print(f"measured: {folder} ({', '.join(sorted(p.name for p in folder.iterdir()))}); its README.md is a draft to "
          "complete")
    for timed in (check, spare):
        if timed and timed.get("step_ms") and timed.get("device"):
            new = fold_step_ms(a.measured / "step_ms.json", timed, name)
            print(f"step_ms.json: {new['step_ms']} on {new['device']}")

    if added and not a.no_compare:
        rc |= subprocess.run(workbench + COMPARE, cwd=REPO).returncode
        # the GPU runs' own COMPARISON.md (its default grid: grids/paper.toml)
        rc |= subprocess.run(workbench + ["compare", str(a.results)], cwd=REPO).returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
