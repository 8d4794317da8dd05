"""Issue 26, by fault injection: damaged copies of shipped runs (truncated / garbage files), killed parents, hostile
inputs. Every test here failed before its fix."""
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.store import RunStore, StoreError, finished_runs
from workbench.store.manifest import write_manifest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "results" / "repro"
# RoPE on Task 1 in PE-Lab's settings, three seeds: Table 1's cell that one damaged run would shrink
ROPE_T1 = [r for r in ("t1-rope-repro-s42-e451f6", "t1-rope-repro-s43-096a4b", "t1-rope-repro-s44-7eff0c")
           if (SHIPPED / r).is_dir()]


def _copy(tmp_path: Path, ids, unbundled: bool = False) -> Path:
    """Copies of shipped runs; `unbundled`: in the layout before `workbench bundle` (one compact parquet file per
    table under tables/), rebuilt from the bundle."""
    if not ids:
        pytest.skip("no shipped results in this checkout")
    dst = tmp_path / "shipped"
    for rid in ids:
        shutil.copytree(SHIPPED / rid, dst / rid)
        bundle = dst / rid / "tables.parquet"
        if unbundled and bundle.exists():
            from workbench.store.bundle import bundle_names, read_bundle_table
            from workbench.store.run import parquet_bytes

            (dst / rid / "tables").mkdir()
            for name in bundle_names(bundle):
                (dst / rid / "tables" / f"{name}.parquet").write_bytes(
                    parquet_bytes(read_bundle_table(bundle, name)))
            bundle.unlink()
            (dst / rid / "manifest.json").unlink()  # that layout predates manifests
    return dst


def _damage(folder: Path, what: str) -> None:
    """Inject one fault into a run folder."""
    if what == "truncated run.json":
        p = folder / "run.json"
        p.write_bytes(p.read_bytes()[:40])
    elif what == "run.json null":
        (folder / "run.json").write_text("null")
    elif what == "config.json []":
        (folder / "config.json").write_text("[]")
    elif what == "garbage metrics":
        (folder / "metrics.jsonl").write_bytes(b"\x00garbage{{{\n")
    elif what == "flipped byte mid tables":  # footer intact: only the manifest tells (issue 43)
        p = folder / "tables.parquet"
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0x01
        p.write_bytes(bytes(data))
    elif what == "truncated parquet":  # the bundle of a shipped run, or one table file
        p = folder / "tables.parquet" if (folder / "tables.parquet").exists() else \
            next((folder / "tables").glob("deposit*.parquet"))
        p.write_bytes(p.read_bytes()[:100])
    else:
        raise AssertionError(what)


FAULTS = ["truncated run.json", "run.json null", "config.json []", "garbage metrics", "truncated parquet"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_damaged_run_is_listed_as_corrupt_not_dropped(fault, tmp_path):
    """finished_runs (what compare, the dashboard's Findings and notebooks read through claims.run_table) keeps
    the readable runs and names the damaged one with a reason that holds no absolute path."""
    from workbench.analysis.claims import run_table

    root = _copy(tmp_path, ROPE_T1[:2])
    _damage(root / ROPE_T1[0], fault)
    store = RunStore(root, readonly=True)
    runs, corrupt = finished_runs(store)
    assert [r.id for r in runs] == [ROPE_T1[1]]
    assert list(corrupt) == [ROPE_T1[0]] and str(tmp_path) not in corrupt[ROPE_T1[0]]
    table = run_table(store)
    assert list(table.run_id) == [ROPE_T1[1]] and list(table.attrs["corrupt"]) == [ROPE_T1[0]]


def test_run_json_null_is_corrupt_not_created(tmp_path):
    root = _copy(tmp_path, ROPE_T1[:1])
    _damage(root / ROPE_T1[0], "run.json null")
    with pytest.raises(StoreError, match="run.json: must hold a JSON object, not NoneType"):
        RunStore(root, readonly=True).get(ROPE_T1[0])
    assert RunStore(root, readonly=True).query().status.tolist() == ["corrupt"]


def test_store_errors_name_the_file_without_absolute_paths(tmp_path):
    """The index's error column (the dashboard's Runs page shows it) never reveals where the store lives."""
    root = _copy(tmp_path, ROPE_T1[:1])
    _damage(root / ROPE_T1[0], "truncated run.json")
    err = RunStore(root, readonly=True).query().error.iloc[0]
    assert f"{ROPE_T1[0]}/run.json" in err and str(tmp_path) not in err and str(root.resolve()) not in err


@pytest.mark.parametrize("fault", ["config.json []", "garbage metrics", "truncated parquet", "flipped byte mid tables"])
def test_compare_lists_a_damaged_run_and_computes_from_the_rest(fault, tmp_path):
    """compare exits 0, lists the damaged run with its reason under "Runs that could not be read" and computes from
    the other runs (Table 1's RoPE cell says 2 seeds, not silently 3 -> 2)."""
    from workbench.cli import app

    root = _copy(tmp_path, ROPE_T1)
    _damage(root / ROPE_T1[0], fault)
    res = CliRunner().invoke(app, ["compare", str(root), "--grid", str(tmp_path / "none.toml")])
    assert res.exit_code == 0, res.output
    text = (root / "COMPARISON.md").read_text()
    section = text[text.index("## Runs that could not be read"):text.index("## Table 1")]
    assert f"`{ROPE_T1[0]}`" in section and "computed from the other" in section
    assert str(tmp_path) not in text
    assert "100.00 (100.00-100.00, 2 seeds)" in text  # Table 1: RoPE, Task 1, PE-Lab settings


# ---- ship / verify -------------------------------------------------------------------------------------------
def _own_finished_run(tmp_path: Path) -> tuple[Path, str]:
    """A finished run in a user's store, with (stand-in) weights and checkpoint, analysed after its last epoch."""
    root = _copy(tmp_path, ROPE_T1[:1])
    rid = ROPE_T1[0]
    for name in ("model.safetensors", "optim.safetensors", "state.json"):
        (root / rid / name).write_bytes(b"{}")
    (root / rid / "tables").mkdir(exist_ok=True)
    (root / rid / "tables" / "late.parquet").write_bytes(b"")  # newer than run.json: not shipped yet
    (root / rid / "code.diff").write_text("diff --git a/x b/x\n")  # it was trained from a dirty tree, diff recorded
    return root, rid


@pytest.mark.parametrize("to", [".", "sub/results"])
def test_ship_refuses_a_destination_in_its_own_store(to, tmp_path):
    """Shipping into the run store (or a folder inside it) would replace the run folder: weights gone."""
    from workbench.cli import app

    root, rid = _own_finished_run(tmp_path)
    res = CliRunner().invoke(app, ["ship", rid, "--root", str(root), "--to", str(root / to), "--no-analyze"])
    assert res.exit_code == 2 and "cannot ship into" in res.output
    assert {"model.safetensors", "optim.safetensors", "state.json"} <= {p.name for p in (root / rid).iterdir()}


@pytest.mark.parametrize("doing", ["trained", "shipped"])
def test_ship_follow_ships_a_run_when_its_holder_lets_go(tmp_path, doing):
    """`ship --follow` beside a sweep: a run being trained (lock held, run.json "running"), or one another `ship`
    holds (finished, lock held), is waited for, counted as what its holder does, and shipped once it is let go;
    the follow then stops by itself (every run shipped)."""
    import os
    import socket
    import threading

    from workbench.cli import app
    from workbench.store.lock import RunLock

    root, rid = _own_finished_run(tmp_path)
    (root / rid / "tables" / "late.parquet").unlink()  # the fixture's stand-in table does not read
    run = RunStore(root).get(rid)
    if doing == "trained":
        run.update_info(status="running", pid=os.getpid(), host=socket.gethostname(), pid_started=None)
    lock = RunLock(root, rid, doing=doing).acquire()

    def finish():
        run.update_info(status="finished")
        lock.release()

    timer = threading.Timer(1.5, finish)
    timer.start()
    try:
        res = CliRunner().invoke(app, ["ship", rid, "--root", str(root), "--to", str(tmp_path / "out"),
                                       "--no-analyze", "--follow", "1"])
    finally:
        timer.cancel()
        lock.release()
    assert res.exit_code == 0, (res.output, res.exception)
    trained, shipped = (1, 0) if doing == "trained" else (0, 1)
    assert (f"following: 1 run(s) to ship, {trained} being trained, {shipped} being shipped by another process"
            in res.output)
    assert (tmp_path / "out" / rid / "run.json").is_file() and "1 shipped, 0 unchanged, 0 skipped" in res.output


def test_ship_follow_stops_when_nothing_is_being_trained(tmp_path):
    """A run that is neither finished nor held by a trainer (a stopped sweep) does not keep `--follow` waiting:
    two idle looks, then it stops and names the run."""
    import os
    import socket

    from workbench.cli import app

    root, rid = _own_finished_run(tmp_path)
    RunStore(root).get(rid).update_info(status="running", pid=os.getpid(), host=socket.gethostname())
    res = CliRunner().invoke(app, ["ship", rid, "--root", str(root), "--to", str(tmp_path / "out"),
                                   "--no-analyze", "--follow", "1"])
    assert res.exit_code == 0, res.output
    assert "neither finished nor being trained or shipped by another process after two looks" in res.output
    assert rid in res.output
    assert "0 shipped, 0 unchanged, 1 skipped" in res.output and not (tmp_path / "out" / rid).exists()


def test_ship_follow_while_pid_stops_at_the_first_look_after_the_sweep_ended(tmp_path):
    """`--while-pid` (a GPU window's follower): a run held by a trainer keeps --follow waiting only while the sweep
    process lives; once it has ended, one last look, then stop at once (no 10-minute idle looks, no wasted window)."""
    import os
    import socket
    import subprocess
    import sys
    import time as _time

    from workbench.cli import app
    from workbench.store.lock import RunLock

    root, rid = _own_finished_run(tmp_path)
    RunStore(root).get(rid).update_info(status="running", pid=os.getpid(), host=socket.gethostname())
    lock = RunLock(root, rid, doing="trained").acquire()  # looks like a run being trained: plain --follow waits
    sweep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    t0 = _time.monotonic()
    try:
        res = CliRunner().invoke(app, ["ship", rid, "--root", str(root), "--to", str(tmp_path / "out"),
                                       "--no-analyze", "--follow", "600", "--while-pid", str(sweep.pid)])
    finally:
        lock.release()
        sweep.wait()
    assert res.exit_code == 0, (res.output, res.exception)
    assert _time.monotonic() - t0 < 60  # woke within about a second of the sweep's end, not after 600 s
    assert f"process {sweep.pid} has ended; stopped following: 1 run(s) not finished" in res.output
    assert "0 shipped, 0 unchanged, 1 skipped" in res.output
    bad = CliRunner().invoke(app, ["ship", rid, "--root", str(root), "--to", str(tmp_path / "out"),
                                   "--no-analyze", "--while-pid", "1"])
    assert bad.exit_code == 2 and "--while-pid needs --follow" in bad.output


def test_ship_follow_does_not_wait_for_a_run_shipped_before(tmp_path):
    """A grid run absent from the store (runs-repro lost) but already in the results store is done, not waited for:
    `--follow` says so and stops at once; a `--to` that does not exist yet does not hide a missing run (named
    without --follow: refused)."""
    from workbench.cli import app

    shipped = _copy(tmp_path, ROPE_T1[:1])
    rid, own = ROPE_T1[0], tmp_path / "own"
    res = CliRunner().invoke(app, ["ship", rid, "--root", str(own), "--to", str(shipped), "--no-analyze",
                                   "--follow", "1"])
    assert res.exit_code == 0, res.output
    assert f"{rid}: not in {own}, shipped in {shipped}; skipped" in res.output
    assert "following" not in res.output and "0 shipped, 0 unchanged, 1 skipped" in res.output
    res = CliRunner().invoke(app, ["ship", rid, "--root", str(own), "--to", str(tmp_path / "new"), "--no-analyze"])
    assert res.exit_code == 2 and f"no run {rid} in {own}:" in res.output, res.output


def test_ship_leaves_a_run_another_ship_holds_and_frees_it_after(tmp_path):
    """Two `ship` processes on one grid: the one that takes a finished run's lock analyses and ships it; the other
    skips it, naming the holder, instead of running every analysis a second time. The lock is let go after."""
    import os

    from workbench.cli import app
    from workbench.store.lock import RunLock, lock_holder

    root, rid = _own_finished_run(tmp_path)
    (root / rid / "tables" / "late.parquet").unlink()
    args = ["ship", rid, "--root", str(root), "--to", str(tmp_path / "out"), "--no-analyze"]
    with RunLock(root, rid, doing="shipped"):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert f"run '{rid}': is being shipped by pid {os.getpid()}" in res.output
        assert "0 shipped, 0 unchanged, 1 skipped" in res.output and not (tmp_path / "out" / rid).exists()
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "1 shipped, 0 unchanged, 0 skipped" in res.output, res.output
    assert lock_holder(root, rid) is None


def test_verify_refuses_a_plain_copy_of_the_shipped_folder(tmp_path):
    """A copy of the shipped folder in the user's store is not a re-training: verify must not call it verified,
    even when the shipped metrics were tampered with (the copy has the same ones)."""
    from workbench.cli import app

    shipped = _copy(tmp_path, ROPE_T1[:1])
    rid = ROPE_T1[0]
    metrics = shipped / rid / "metrics.jsonl"
    metrics.write_text(metrics.read_text().replace('"test_acc": 1.0', '"test_acc": 0.5'))
    write_manifest(shipped / rid)  # tampered together with its manifest: the shipped store reads
    shutil.copytree(shipped / rid, tmp_path / "mine" / rid)
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(shipped), "--root", str(tmp_path / "mine"), "-q"])
    assert res.exit_code == 2 and "verified" not in res.output.replace("NOT verified", "")
    assert "copy of the shipped run" in res.output


def test_verify_refuses_root_equal_to_shipped(tmp_path):
    from workbench.cli import app

    shipped = _copy(tmp_path, ROPE_T1[:1])
    res = CliRunner().invoke(app, ["verify", ROPE_T1[0], "--shipped", str(shipped), "--root", str(shipped), "-q"])
    assert res.exit_code == 2 and "is the shipped store" in res.output
    assert not (shipped / "index.sqlite").exists()


# ---- one parquet file per shipped run (issue 21 item 6) ------------------------------------------------------
def test_bundle_converts_shipped_runs_in_place_and_every_table_reads_back_equal(tmp_path):
    """`workbench bundle` turns tables/*.parquet into one tables.parquet per run: the same tables, values and
    dtypes through run.load_table; smaller; COMPARISON inputs unchanged; a second run is a no-op."""
    import pandas as pd

    from workbench.cli import app

    ids = [ROPE_T1[0], "t2-mla-repro-s42-901034"]
    root = _copy(tmp_path, [r for r in ids if (SHIPPED / r).is_dir()], unbundled=True)
    before = {rid: {n: RunStore(root, readonly=True).get(rid).load_table(n)
                    for n in RunStore(root, readonly=True).get(rid).tables()} for rid in ids}
    size = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    res = CliRunner().invoke(app, ["bundle", str(root)])
    assert res.exit_code == 0, res.output
    store = RunStore(root, readonly=True)
    for rid in ids:
        assert sorted(p.name for p in (root / rid).iterdir()) == ["config.json", "metrics.jsonl", "run.json",
                                                                 "tables.parquet"]
        run = store.get(rid)
        assert run.tables() == sorted(before[rid]) and len(before[rid]) >= 15
        for name, df in before[rid].items():
            pd.testing.assert_frame_equal(run.load_table(name), df, check_exact=True, obj=f"{rid}/{name}")
    assert sum(p.stat().st_size for p in root.rglob("*.parquet")) < 0.7 * size
    assert CliRunner().invoke(app, ["bundle", str(root)]).exit_code == 0
    assert finished_runs(store)[1] == {}
    own = tmp_path / "own"  # a store one trains into (no run.json `shipped`): refused, nothing converted
    shutil.copytree(root / ids[0], own / ids[0])
    info = json.loads((own / ids[0] / "run.json").read_text())
    info.pop("shipped")
    (own / ids[0] / "run.json").write_text(json.dumps(info))
    files = sorted(p.name for p in (own / ids[0]).iterdir())
    res = CliRunner().invoke(app, ["bundle", str(own)])
    assert res.exit_code == 2 and "is not a shipped store" in res.output and ids[0] in res.output, res.output
    assert sorted(p.name for p in (own / ids[0]).iterdir()) == files


def test_bundle_keeps_each_tables_columns_order_and_dtypes(tmp_path):
    """Tables sharing column names (same or different types), empty tables, booleans, strings with None and
    integer columns other tables lack all read back as written (float64 stored as float32)."""
    import numpy as np
    import pandas as pd

    from workbench.store.bundle import bundle_bytes, bundle_names, read_bundle_table

    tables = {
        "a": pd.DataFrame({"layer": [0, 1], "name": ["x", None], "v": [0.5, np.nan]}),
        "b": pd.DataFrame({"flag": [True, False, True], "layer": ["L0", "L1", "L2"]}),  # layer: another type
        "c": pd.DataFrame({"layer": pd.Series([], dtype="int64"), "v": pd.Series([], dtype="float64")}),
        "d": pd.DataFrame({"v": [1.25], "layer": [7], "count": [3]}),  # the columns in another order
    }
    path = tmp_path / "tables.parquet"
    path.write_bytes(bundle_bytes(tables))
    assert bundle_names(path) == ["a", "b", "c", "d"]
    for name, df in tables.items():
        want = df.astype({c: np.float32 for c in df.columns if df[c].dtype == np.float64})
        pd.testing.assert_frame_equal(read_bundle_table(path, name), want, check_exact=True, obj=name)


def test_a_bundle_is_decoded_once_while_unchanged_and_afresh_once_replaced_or_rewritten(tmp_path):
    """`read_bundle_table` memoises a table per path and `stat_key` (a file changed over 2 s ago): a second
    read decodes nothing, a caller that changes its frame does not change the next one's, a bundle replaced (a new
    inode, as `ship` writes) reads its new rows, and one rewritten in place just now is read afresh."""
    import os

    import numpy as np
    import pandas as pd

    from workbench.store import bundle

    path, tmp = tmp_path / "tables.parquet", tmp_path / "new.parquet"

    def write(v: float, in_place: bool = False, age_s: float = 10):
        (path if in_place else tmp).write_bytes(bundle.bundle_bytes({"a": pd.DataFrame({"v": [v, 2.0]})}))
        if not in_place:
            os.replace(tmp, path)
        t = path.stat().st_mtime - age_s
        os.utime(path, (t, t))

    write(1.0)
    before = bundle._cached_table.cache_info()
    first = bundle.read_bundle_table(path, "a")
    first.loc[0, "v"] = 99.0
    again = bundle.read_bundle_table(path, "a")
    after = bundle._cached_table.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
    assert again["v"].tolist() == [1.0, 2.0]
    write(3.0)  # replaced, as ship replaces a run's files
    assert bundle.read_bundle_table(path, "a")["v"].tolist() == [3.0, 2.0]
    write(5.0, in_place=True, age_s=0)  # rewritten in place within the file system clock's tick: not memoised
    assert bundle.read_bundle_table(path, "a")["v"].tolist() == [5.0, 2.0]
    assert bundle.read_bundle_table(path, "a").dtypes["v"] == np.float32


def test_bundle_leaves_a_run_whole_when_a_table_is_damaged(tmp_path):
    from workbench.cli import app

    root = _copy(tmp_path, ROPE_T1[:1], unbundled=True)
    folder = root / ROPE_T1[0]
    tables = sorted(p.name for p in (folder / "tables").iterdir())
    _damage(folder, "truncated parquet")
    res = CliRunner().invoke(app, ["bundle", str(root)])
    assert res.exit_code == 2 and "nothing converted" in res.output
    assert sorted(p.name for p in (folder / "tables").iterdir()) == tables
    assert not (folder / "tables.parquet").exists() and not list(folder.glob(".*"))


def test_model_weights_are_written_byte_identically():
    """The same tensors and metadata give the same model.safetensors bytes (safetensors' header order varies)."""
    import hashlib

    import torch

    from workbench.store.run import safetensors_bytes

    tensors = {f"blocks.{i}.w": torch.arange(6.0).reshape(2, 3) + i for i in range(6)}
    meta = {"run_id": "t1-x", "epoch": "3", "a": "1", "b": "2"}
    digests = {hashlib.sha256(safetensors_bytes(tensors, meta)).hexdigest() for _ in range(20)}
    assert len(digests) == 1
    from safetensors.torch import load

    back = load(safetensors_bytes(tensors, meta))
    assert all(torch.equal(back[k], v) for k, v in tensors.items())


# ---- sweep workers die with their parent ---------------------------------------------------------------------
_PARENT = """
import multiprocessing as mp, os, sys, time
from workbench.train.workers import _worker

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    inbox, events = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(w, sys.argv[1], sys.argv[2], inbox, events, {}, os.getpid()),
                         daemon=True) for w in range(2)]
    for p in procs:
        p.start()
    for _ in procs:
        assert events.get(timeout=300)[0] == "ready"
    print(" ".join(str(p.pid) for p in procs), flush=True)
    time.sleep(600)  # the sweep, blocked; its workers wait on their queue
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_sweep_workers_exit_when_their_parent_is_killed(sig, tmp_path):
    import contextlib
    import os
    import signal
    import subprocess
    import sys

    import psutil

    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs"), str(tmp_path / "data")],
                              stdout=subprocess.PIPE, text=True, env=env)
    workers = []
    try:
        workers = [psutil.Process(int(pid)) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(w.is_running() for w in workers)
        parent.send_signal(getattr(signal, sig))
        parent.wait(timeout=60)
        gone, alive = psutil.wait_procs(workers, timeout=60)  # a deadline, not a speed check
        assert not alive, f"workers {[w.pid for w in alive]} outlived their parent ({sig})"
    finally:
        parent.kill()
        parent.wait()
        for w in workers:  # only the processes this test started, by pid
            with contextlib.suppress(psutil.NoSuchProcess):
                w.kill()


# ---- hostile command lines -----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["runs"], ["report", "--out", "{tmp}/r.html"]])
def test_reading_commands_never_create_a_store_at_a_missing_root(command, tmp_path):
    from workbench.cli import app

    missing = tmp_path / "typo"
    res = CliRunner().invoke(app, [c.format(tmp=tmp_path) for c in command] + ["--root", str(missing)])
    assert res.exit_code == 2 and "no run store there" in res.output
    assert not missing.exists()


@pytest.mark.parametrize("grid_text, args, says", [
    ('preset = "smoke"\nschemes = []\n', [], "no schemes or variants"),
    ('preset = "smoke"\nschemes = ["rope"]\n', ["--tier", "9"], "the grid's tiers are [1]"),
    ('preset = "smoke"\nschemes = ["rope"]\nseeds = [[1, 2]]\n', [], "seeds = [[1, 2]]: each entry must be one"),
    ('preset = "smoke"\nschemes = ["rope"]\n[[variants]]\nname = "n"\nscheme = "nope"\ntasks = [{a = 1}]\n', [],
     "tasks of n = [{'a': 1}]: each entry must be one value"),
])
def test_a_grid_of_nothing_or_of_nested_lists_is_an_error(grid_text, args, says, tmp_path):
    from workbench.cli import app

    grid = tmp_path / "g.toml"
    grid.write_text(grid_text)
    res = CliRunner().invoke(app, ["sweep", str(grid), "--dry-run", "--root", str(tmp_path / "runs"), *args])
    assert res.exit_code == 2 and says in res.output
    assert not (tmp_path / "runs").exists()


def test_report_refuses_an_unknown_figure_format_even_without_figures_dir(tmp_path):
    from workbench.cli import app

    res = CliRunner().invoke(app, ["report", "--figure-format", "bogus", "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "bogus" in res.output and not (tmp_path / "r.html").exists()


# ---- the dashboard on a damaged shipped folder ---------------------------------------------------------------
def test_a_run_with_a_corrupt_run_json_is_refused_by_get_with_a_clear_error(tmp_path):
    """The dashboard's pages take runs through `store.get` (C.get_run turns StoreError into a hint): a corrupt
    run.json must fail there, not later inside a callback (runs compare, explorer's check_inputs: HTTP 500)."""
    from workbench.store import StoreSet

    root = _copy(tmp_path, ROPE_T1[:1])
    _damage(root / ROPE_T1[0], "truncated run.json")
    with pytest.raises(StoreError, match="run.json"):
        StoreSet.open(tmp_path / "own", root).get(ROPE_T1[0])


def test_the_index_has_no_nan_text_for_a_corrupt_run(tmp_path):
    """A corrupt row's task / scheme are None, not NaN (the Partial RoPE page sorted the tasks: TypeError)."""
    from workbench.store import StoreSet

    root = _copy(tmp_path, ROPE_T1[:2])
    _damage(root / ROPE_T1[0], "config.json []")
    df = StoreSet.open(tmp_path / "own", root).query()
    assert sorted(t for t in df.task if t) == ["trigger-distance"]
    assert df.set_index("id").loc[ROPE_T1[0], "scheme"] is None


def test_the_dashboard_serves_a_damaged_shipped_folder(tmp_path):
    """Every page's layout, Findings' tables, Partial RoPE's render and the runs lookup of the compare / explorer
    callbacks on a shipped folder with a config.json `[]`, a truncated run.json and a garbage metrics.jsonl: no
    exception (Dash answers HTTP 500 on one), the damaged runs named without server paths."""
    from apps import common as C
    from apps import create_app, page_modules
    from apps.pages import findings, partial_rope

    root = _copy(tmp_path, ROPE_T1)
    for rid, fault in zip(ROPE_T1, ["config.json []", "truncated run.json", "garbage metrics"]):
        _damage(root / rid, fault)
    app = create_app(tmp_path / "own", shipped=root)
    with app.server.test_request_context():
        for m in page_modules():
            m.layout()
        store = C.stores()
        runs, _, _ = findings._tables(store.shipped)
        assert runs.empty and sorted(runs.attrs["corrupt"]) == ROPE_T1
        partial_rope.render(store, "trigger-distance")
        partial_rope.render_related(store, "trigger-distance")
        for rid in ROPE_T1:  # the garbage metrics too: it no longer reads as finished (issue 43)
            run, hint = C.get_run(store, rid)
            assert run is None and "run" in str(hint) and str(tmp_path) not in str(hint)
        errors = store.query(status="corrupt").error.tolist()
        assert len(errors) == 3 and not any(str(tmp_path) in e for e in errors)


def test_the_findings_tables_are_computed_once_per_state_of_the_store(tmp_path, monkeypatch):
    """The Findings page's claims (every ladder rung) are computed once per state of the shipped store, not on
    every page load and evidence click; adding, re-shipping or damaging a run computes them again."""
    from apps.pages import findings
    from workbench.analysis import claims
    from workbench.store import RunStore

    root = _copy(tmp_path, ROPE_T1)
    store = RunStore(root, readonly=True)
    calls = []
    real = claims.base_claims
    monkeypatch.setattr(claims, "base_claims", lambda *a, **k: calls.append(1) or real(*a, **k))
    findings._TABLES.clear()
    first = findings._tables(store)
    runs, _, cl = findings._tables(store)
    assert len(calls) == 1 and len(runs) == len(ROPE_T1) and cl.equals(first[2])
    runs["scratch"] = 1  # a caller's column does not reach the cache
    assert "scratch" not in findings._tables(store)[0].columns and len(calls) == 1
    stamp = store.contents_stamp()
    shutil.rmtree(root / ROPE_T1[0])
    assert store.contents_stamp() != stamp
    assert len(findings._tables(store)[0]) == len(ROPE_T1) - 1 and len(calls) == 2
    (root / ROPE_T1[1] / "metrics.jsonl").write_text("garbage\n")
    assert list(findings._tables(store)[0].attrs["corrupt"]) == [ROPE_T1[1]] and len(calls) == 3


def test_a_visitor_during_the_warm_up_waits_for_the_findings_tables_and_gets_them_whole(tmp_path, monkeypatch):
    """`workbench app` fills the Findings tables in a thread at start (`findings.warm`): a first visitor calling
    `_computed` meanwhile got the entry half made and a KeyError 'matrix' for several seconds; now it waits for the
    one computation and gets every table."""
    import threading

    from apps.pages import findings
    from workbench.analysis import findings as analysis_findings
    from workbench.store import RunStore

    root = _copy(tmp_path, ROPE_T1)
    entered, go = threading.Event(), threading.Event()
    real = analysis_findings.verdict_matrix

    def held(*a, **k):
        entered.set()
        go.wait(30)
        return real(*a, **k)

    monkeypatch.setattr(analysis_findings, "verdict_matrix", held)
    findings._TABLES.clear()
    warm = threading.Thread(target=findings.warm, args=(root,))
    warm.start()
    assert entered.wait(60)
    threading.Timer(1.0, go.set).start()  # the warm-up finishes a second after the visitor asks
    tables = findings._computed(RunStore(root.resolve(), readonly=True))
    warm.join(60)
    assert {"matrix", "deposits", "overview", "paper_t1"} <= set(tables) and len(tables["runs"]) == len(ROPE_T1)


def test_bundled_shipped_runs_leave_room_for_200_in_the_30_mb_budget(tmp_path):
    """Issue 21 item 6: about 185 shipped runs (105 today + the rest of the grid and the scale ladder) must fit
    results/repro's 30 MB. A sample of today's shipped runs (every 10th), bundled: their mean folder size x 200 <
    30 MB (one file per table, as shipped before, is about 178 kB a run: 200 of them take 36 MB)."""
    from workbench.store.ship import bundle_shipped

    ids = sorted(p.name for p in SHIPPED.iterdir() if (p / "run.json").is_file())[::10] if SHIPPED.is_dir() else []
    root = _copy(tmp_path, ids)
    bundle_shipped(root, log=lambda msg: None)
    per_run = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / len(ids)
    store = RunStore(root, readonly=True)
    assert all((root / rid / "tables.parquet").is_file() for rid in ids if store.get(rid).tables())
    assert per_run * 200 < 30e6, f"{per_run / 1e3:.0f} kB a run"


def test_ship_of_no_grid_points_names_the_grids_tiers(tmp_path):
    from workbench.cli import app

    grid = tmp_path / "g.toml"
    grid.write_text('preset = "smoke"\nschemes = ["rope"]\n')
    res = CliRunner().invoke(app, ["ship", "--grid", str(grid), "--tier", "9", "--to", str(tmp_path / "out"),
                                   "--root", str(tmp_path / "runs")])
    assert res.exit_code == 2 and "the grid's tiers are [1]" in res.output


def test_identical_runs_write_identical_weight_files(tmp_path):
    """Two trainings of one config (same seed, one thread) give byte-identical model.safetensors: its sha256
    (recorded in run.json) identifies the weights."""
    import hashlib

    from workbench.train import resolve_config, train

    tiny = ["model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_layers=1", "task.n_examples=200",
            "train.batch_size=32", "train.epochs=1"]
    digests = []
    for name in ("a", "b"):
        store = RunStore(tmp_path / name, data_dir=tmp_path / "data")
        run = train(resolve_config("smoke", "rope", "trigger-distance", sets=tiny, store=store), store,
                    progress=False, threads=1)
        digests.append(hashlib.sha256((run.path / "model.safetensors").read_bytes()).hexdigest())
        assert digests[-1] == run.info["weights"]["sha256"]
    assert digests[0] == digests[1]
