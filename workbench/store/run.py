"""One run folder: config, checkpoint, metrics, run info and analysis tables.

    <root>/<run_id>/
        config.json          fully resolved run config {"preset", "tag", "model", "task", "train"}
        run.json             status, timestamps, dataset hash, code version, device, wall time, final metrics
        metrics.jsonl        one JSON object per finished epoch
        model.safetensors    model weights (metadata: run id, epoch)
        optim.safetensors    optimizer moments + RNG states, for resume
        state.json           epoch, scheduler step, optimizer hyper-parameters, sha256 of the two checkpoints
        tables/<name>.parquet  analysis tables (one file each)
        tables.parquet       shipped runs: all analysis tables in one file (`bundle.py`); read the same way

Nothing here unpickles: weights are safetensors, everything else JSON or parquet.

A checkpoint is three files that must agree. They are written as a small journal: `model.safetensors.next`
and `optim.safetensors.next` first (each atomically), then `state.json` (atomically; the commit point, it
records the sha256 of both), then both `.next` files are renamed over the old ones. A crash at any point
leaves either the old checkpoint or the new one; readers pick whichever the committed `state.json` names.
After each commit run.json records `weights: {"sha256", "epoch"}` of model.safetensors, so the weights can be
verified even when state.json is lost (or not shipped).

Readers tolerate every malformed file: each problem is a `StoreError` naming the run, the file and the reason
(wrong JSON types included), which the index turns into a `corrupt` row.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import io
import json
import os
import re
import socket
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from .bundle import BUNDLE, PROVENANCE_KEY, bundle_names, bundle_provenance, read_bundle_table
from .errors import StoreError
from .manifest import CODE_DIFF, MANIFEST, TABLES, sha256_file, verify_manifest

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .runstore import RunStore

CONFIG, INFO, METRICS, STATE = "config.json", "run.json", "metrics.jsonl", "state.json"
TIMING_KEYS = ("epoch_time_s", "wall_s", "seq_per_s", "tok_per_s", "time")  # a metrics row's machine-dependent part
MODEL, OPTIM = "model.safetensors", "optim.safetensors"
STATUSES = ("created", "running", "finished", "failed", "interrupted")
LISTED_STATUSES = STATUSES + ("incomplete", "corrupt")  # what the index may also show for a broken folder
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
STALE_TABLE_TMP_S = 600  # a temp file in tables/ older than this is left by a killed writer
# run.json fields readers rely on, and the JSON types they must have (anything else is `corrupt`)
_NUM = (int, float)
INFO_TYPES: dict[str, tuple] = {"status": (str,), "epoch": (int,), "final": (dict,), "wall_time_s": _NUM,
                                "created": (str,), "updated": (str,), "error": (str,), "pid": (int,),
                                "host": (str,), "threads": (int,), "dataset_hash": (str,), "weights": (dict,)}


def learned(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's metrics rows without their timings: what two trainings of the same model share bit for bit."""
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def same_training(shipped_rows: list[dict[str, Any]], rows: list[dict[str, Any]]) -> bool:
    """Whether a re-training's metrics `rows` are the shipped run's bit for bit: the same epochs, and at each every
    field the shipped row recorded, timings aside, present and equal. A field the re-training records beyond them
    is not compared: a metric training records since the run was trained (`train_acc_eval` and `train_loss_eval`,
    the training-subset evaluation, for runs trained before it existed), measured on the same weights."""
    return len(shipped_rows) == len(rows) and all(
        set(a) <= set(b) and {k: b[k] for k in a} == a for a, b in zip(learned(shipped_rows), learned(rows)))


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def process_identity() -> dict[str, Any]:
    """What identifies the current process, so others can tell a live run from a killed one."""
    import psutil

    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_started": psutil.Process().create_time()}


def machine_identity() -> dict[str, Any]:
    """Provenance of a run's numbers: the machine it ran on (CPU model and vendor, cores, OS, Python, the SIMD
    level torch dispatches to when torch is loaded) and its load. Float kernels (MKL, oneDNN) differ between CPU
    models and vendors, so a run re-trains bit-identically only on the CPU model it was trained on."""
    import platform
    import sys

    cpu, vendor = platform.processor() or platform.machine(), None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id" and vendor is None:
                vendor = value.strip()
            if key.strip() == "model name":
                cpu = value.strip()
                break
    torch = sys.modules.get("torch")
    capability = torch.backends.cpu.get_cpu_capability() if torch is not None else None
    return {"cpu": cpu, "cpu_vendor": vendor, "cpu_capability": capability, "cores": os.cpu_count(),
            "os": platform.platform(), "python": platform.python_version(),
            "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}


NUMERICS_KEYS = ("torch", "cpu_capability", "cpu_vendor", "blas", "mkl", "onednn", "openmp", "parallel_backend",
                 "threads")


def numerics_identity() -> dict[str, Any]:
    """What decides a CPU run's floats, beyond its config and data: torch's version, the SIMD level it dispatches
    to, the CPU vendor (MKL takes other code paths on AMD than on Intel), the BLAS / MKL / oneDNN / OpenMP it was
    built with, its parallel backend and thread count. Two machines that agree on all of these re-train a run
    bit-identically (docs/reproduction.md); where one differs, `workbench verify` judges the re-run statistically."""
    import re
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    show, parallel = torch.__config__.show(), torch.__config__.parallel_info()

    def find(pattern: str, text: str) -> str | None:
        m = re.search(pattern, text)
        return m.group(1).strip() if m else None

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_vendor": machine_identity().get("cpu_vendor"), "blas": find(r"BLAS_INFO=([^,\s]+)", show),
            "mkl": find(r"Math Kernel Library Version ([^\n]+?) for", show),
            "onednn": find(r"MKL-DNN (v[^\n]+)", show), "openmp": find(r"OpenMP (\d+)", show),
            "parallel_backend": find(r"ATen parallel backend: ([^\n]+)", parallel),
            "threads": torch.get_num_threads()}


def numerics_record(info: dict[str, Any], resumed: bool) -> dict[str, Any]:
    """run.json's numerics fields for a training that starts now (`resumed`: from a checkpoint of the run `info`
    describes). A fresh start records this process's `numerics`. A resume keeps the numerics the run started with
    and adds, in `resumed_numerics`, this process's value of each key that differs (merged with an earlier resume's):
    the later epochs ran on those, so no one re-training follows the run bit for bit (`recorded_numerics`)."""
    here = numerics_identity()
    started = info.get("numerics")
    if not resumed or not isinstance(started, dict):
        return {"numerics": here, "resumed_numerics": None}
    changed = {k: here.get(k) for k in NUMERICS_KEYS if started.get(k) != here.get(k)}
    merged = {**(info.get("resumed_numerics") or {}), **changed}
    return {"numerics": started, "resumed_numerics": merged or None}


def recorded_numerics(info: dict[str, Any]) -> dict[str, Any]:
    """A run.json's `numerics`; for a run trained before that record existed, what its other fields say
    (torch_version, threads, machine.cpu_capability / cpu_vendor), the rest unknown (None). A key a resume changed
    (`resumed_numerics`) reads "A, then B after a resume": no single machine has it, so nothing is held to it and
    a re-training is judged as one on other numerics."""
    if isinstance(info.get("numerics"), dict):
        later = info.get("resumed_numerics") if isinstance(info.get("resumed_numerics"), dict) else {}
        return {k: f"{info['numerics'].get(k)}, then {later[k]} after a resume" if k in later
                else info["numerics"].get(k) for k in NUMERICS_KEYS}
    machine = info.get("machine") if isinstance(info.get("machine"), dict) else {}
    return {k: None for k in NUMERICS_KEYS} | {"torch": info.get("torch_version"), "threads": info.get("threads"),
                                               "cpu_capability": machine.get("cpu_capability"),
                                               "cpu_vendor": machine.get("cpu_vendor")}


def numerics_differences(recorded: dict[str, Any], here: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{key: (recorded, here)} for every numerics key that differs or that the recorded run does not say."""
    return {k: (recorded.get(k), here.get(k)) for k in NUMERICS_KEYS
            if recorded.get(k) is None or recorded.get(k) != here.get(k)}


def process_alive(info: dict[str, Any]) -> bool:
    """False only when we can tell that the process recorded in `info` is gone (same host); a killed process
    its parent has not reaped yet (a zombie, e.g. a killed sweep or Ray worker) is gone."""
    import psutil

    if info.get("host") != socket.gethostname() or info.get("pid") is None:
        return True  # another machine: cannot tell
    try:
        p = psutil.Process(int(info["pid"]))
        started = info.get("pid_started")
        same = started is None or abs(p.create_time() - float(started)) < 1.0
        return same and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False



_PARAMETERS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("table_parameters", default=None)


@contextlib.contextmanager
def table_parameters(params: dict[str, Any]):
    """Within it, a table saved "now" (`Run.save_table`) records `params` (the analysis's keyword arguments: seed,
    n_boot, mode, ...) in its provenance as `parameters`: the settings that made its numbers."""
    token = _PARAMETERS.set(params)
    try:
        yield
    finally:
        _PARAMETERS.reset(token)


def openblas_kernels() -> str | None:
    """The kernels OpenBLAS runs here (numpy's and scipy's: threadpoolctl's `architecture`, e.g. "Haswell",
    "SkylakeX"), None where numpy runs on another BLAS. The probes' ridge fits follow them (1.07e-05 apart at Haswell's
    and SkylakeX's on the same weights; `train.recreate.simd_hold` holds them)."""
    from threadpoolctl import threadpool_info

    return next((i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"), None)


def table_provenance() -> dict[str, Any]:
    """What made a table saved now: the code (`code_version`), when (`analysed`, UTC), the CPU, and the numerics
    (`numerics_identity`: torch, SIMD level, BLAS, threads ...: the probes' L-BFGS sums in an order that follows
    the thread count, 0.012 apart at 1 and 2 threads on the same weights; and `openblas_kernels`, which the probes'
    ridge fits run on that thread count)."""
    from .runstore import code_version

    return {"code_version": code_version(), "analysed": now_iso(), "cpu": machine_identity().get("cpu"),
            "numerics": numerics_identity() | {"openblas": openblas_kernels()}}


def parquet_bytes(df: "pd.DataFrame", provenance: dict[str, Any] | None = None) -> bytes:
    """`df` as parquet bytes (no index): a run store's own table file, with `provenance` in its key-value metadata
    (`bundle.PROVENANCE_KEY`, the key a bundle keeps them under; `pd.read_parquet` reads the frame as before).
    Shipped runs hold all their tables in one compact file instead (`workbench.store.bundle`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.Table.from_pandas(df, preserve_index=False)
    if provenance is not None:
        t = t.replace_schema_metadata({**(t.schema.metadata or {}), PROVENANCE_KEY: json.dumps(provenance)})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


def parquet_provenance(path: str | os.PathLike) -> dict[str, Any] | None:
    """The provenance a table file records (`parquet_bytes`); None for one saved before tables recorded it."""
    import pyarrow.parquet as pq

    raw = (pq.read_schema(path).metadata or {}).get(PROVENANCE_KEY)
    return json.loads(raw) if raw else None


def safetensors_bytes(tensors: dict, metadata: dict[str, str]) -> bytes:
    """`tensors` as safetensors bytes that depend on nothing but the tensors and `metadata`, so that their sha256
    identifies the weights: safetensors writes its JSON header from hash maps whose key order changes from one
    process (or call) to the next; the header is re-written with sorted keys, padded with spaces to its length
    (the format's own padding, so every tensor keeps its offset)."""
    import struct

    from safetensors.torch import save

    data = save({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, metadata=metadata)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.dumps(json.loads(data[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    if len(header) > n:  # cannot happen (same content, compact JSON); never write a broken file
        raise AssertionError("safetensors header grew when its keys were sorted")
    return data[:8] + header.ljust(n, b" ") + data[8 + n:]


class Run:
    """A handle on one run folder. Cheap to create; files are read when asked for."""

    def __init__(self, store: "RunStore", run_id: str):
        self.store, self.id = store, run_id
        self.path = Path(store.root) / run_id
        self._config: dict | None = None

    def __repr__(self) -> str:
        return f"Run({self.id!r}, status={self.status!r})"

    def _rel(self, p: str | os.PathLike) -> str:
        """`p` as `<run id>/<file>`: error messages never show where the store lives on this machine (they reach
        the dashboard)."""
        p = Path(p)
        with contextlib.suppress(ValueError):
            p = p.relative_to(self.path)
        return f"{self.id}/{p.as_posix()}"

    # ---- reading JSON files ------------------------------------------------------------------
    def _read_json(self, name: str, missing_ok: bool = False) -> Any:
        p = self.path / name
        try:
            text = p.read_bytes().decode("utf-8")
        except FileNotFoundError:
            if missing_ok:
                return None
            if not self.path.is_dir():
                raise StoreError(f"run folder {self.id} does not exist in {self.store.root.name}/", self.id) from None
            raise StoreError(f"missing ({self._rel(p)})", self.id, name) from None
        except UnicodeDecodeError as e:
            raise StoreError(f"corrupted: not UTF-8 text ({self._rel(p)}): {e}", self.id, name) from None
        except OSError as e:  # a directory, no permission, I/O error
            raise StoreError(f"unreadable ({self._rel(p)}): {e.strerror or e}", self.id, name) from None
        try:
            return json.loads(text)
        except ValueError as e:
            raise StoreError(f"corrupted JSON ({self._rel(p)}): {e}", self.id, name) from None

    @property
    def config(self) -> dict[str, Any]:
        """The fully resolved run config: {"preset", "tag", "model", "task", "train"}."""
        if self._config is None:
            cfg = self._read_json(CONFIG)
            if not isinstance(cfg, dict):
                raise StoreError(f"must hold a JSON object, not {type(cfg).__name__} ({self._rel(CONFIG)})",
                                 self.id, CONFIG)
            bad = sorted(k for k in ("model", "task", "train") if not isinstance(cfg.get(k), dict))
            if bad:
                raise StoreError(f"sections {bad} missing or not objects ({self._rel(CONFIG)})", self.id, CONFIG)
            self._config = cfg
        return self._config

    @property
    def info(self) -> dict[str, Any]:
        """run.json (re-read on every access). StoreError when it is not an object or a known field has the
        wrong JSON type (see `INFO_TYPES`)."""
        if not (self.path / INFO).exists() and not (self.path / INFO).is_symlink():
            return {"id": self.id, "status": "created"}
        info = self._read_json(INFO)
        if not isinstance(info, dict):
            raise StoreError(f"must hold a JSON object, not {type(info).__name__} ({self._rel(INFO)})", self.id, INFO)
        for key, types in INFO_TYPES.items():
            v = info.get(key)
            if v is not None and (not isinstance(v, types) or isinstance(v, bool)):
                raise StoreError(f"field {key!r} must be {'/'.join(t.__name__ for t in types)}, not "
                                 f"{type(v).__name__} {v!r:.60} ({self._rel(INFO)})", self.id, INFO)
        if info.get("status", "created") not in STATUSES:
            raise StoreError(f"unknown status {info['status']!r}; expected one of {STATUSES}", self.id, INFO)
        return info

    @property
    def status(self) -> str:
        """created / running / finished / failed / interrupted. A run whose process died (killed, machine
        crash) without recording it reads as `interrupted`."""
        info = self.info
        st = info.get("status", "created")
        if st == "running" and not process_alive(info):
            return "interrupted"
        return st

    @property
    def final(self) -> dict[str, Any]:
        """Metrics of the last finished epoch ({} if none)."""
        return dict(self.info.get("final") or {})

    def update_info(self, **fields: Any) -> dict[str, Any]:
        self.store.check_writable(self.id)
        info = self.info
        info.update(fields, id=self.id, updated=now_iso())
        atomic_write_json(self.path / INFO, info)
        self.store._index_run(self)
        return info

    def record_code(self, resumed: bool = False, kept_dirty: bool = False) -> dict[str, str]:
        """Writer-side, when training starts: {"code_version": ...} for run.json, and the uncommitted changes
        it was trained with as `code.diff` when the tree is dirty (removed when it is not), so a dirty run can be
        re-created; `ship` refuses a dirty run without it. `resumed` and `kept_dirty` (an earlier session whose
        epochs the resume keeps ran from a dirty tree): that session's code.diff is kept and this session's is not
        written; otherwise a code.diff there is a session's that left no checkpoint, and is replaced or removed."""
        from .runstore import code_diff, code_version

        self.store.check_writable(self.id)
        version, p = code_version(), self.path / CODE_DIFF
        diff = code_diff() if version.endswith("-dirty") else None
        keep = resumed and kept_dirty and p.exists()
        if diff and not keep:
            atomic_write_text(p, diff)
        elif not keep:
            p.unlink(missing_ok=True)
        return {"code_version": version}

    # ---- metrics -------------------------------------------------------------------------------
    def metric_rows(self) -> list[dict[str, Any]]:
        p = self.path / METRICS
        if not p.exists():
            return []
        rows = []
        try:
            text = p.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(f"unreadable ({self._rel(p)}): {e}", self.id, METRICS) from None
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise StoreError(f"corrupted line {i} ({self._rel(p)}): {e}", self.id, METRICS) from None
            if not isinstance(row, dict):
                raise StoreError(f"line {i} is not a JSON object ({self._rel(p)})", self.id, METRICS)
            rows.append(row)
        self.verify_shipped()
        return rows

    def metrics(self) -> "pd.DataFrame":
        """One row per epoch: epoch, step, lr, train_loss, train_acc, test_loss, test_acc, wall_s, seq_per_s..."""
        import pandas as pd

        return pd.DataFrame(self.metric_rows())

    def write_metrics(self, rows: list[dict[str, Any]]) -> str:
        """Rewrite metrics.jsonl atomically (it is small: one line per epoch); its sha256, which the trainer
        records in run.json (`metrics_sha256`) so an edit made afterwards is found (`metrics_edited`)."""
        self.store.check_writable(self.id)
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        atomic_write_text(self.path / METRICS, text)
        return hashlib.sha256(text.encode()).hexdigest()

    def trust_problems(self) -> list[str]:
        """Why this run's files may not be what its training wrote ([] when they check out): the weights' sha256
        against the one recorded in run.json (and state.json), metrics.jsonl's against run.json's
        `metrics_sha256`. `workbench verify` re-trains an own copy that does not check out."""
        info, problems = self.info, []
        want = (info.get("weights") or {}).get("sha256")
        state = self.state() if (self.path / STATE).exists() else None
        want_state = ((state or {}).get("files") or {}).get(MODEL) if isinstance(state, dict) else None
        if not (self.path / MODEL).is_file():
            problems.append(f"no {MODEL}")
        elif not want:
            problems.append(f"no weights sha256 recorded in {INFO}")
        else:
            have = sha256_file(self.path / MODEL)
            if have != want or (want_state and have != want_state):
                problems.append(f"{MODEL}'s sha256 differs from the one recorded in {INFO}")
        if not info.get("metrics_sha256"):
            problems.append(f"no metrics sha256 recorded in {INFO} (trained before PE-Lab recorded it)")
        elif self.metrics_changed():
            problems.append(f"{METRICS} changed after training (its sha256 differs from the one in {INFO})")
        return problems

    def metrics_changed(self) -> bool:
        """Whether metrics.jsonl is not what the training wrote: its sha256 differs from run.json's `metrics_sha256`
        (False where none is recorded: a run trained before PE-Lab recorded it)."""
        want = self.info.get("metrics_sha256")
        return bool(want) and (not (self.path / METRICS).is_file() or sha256_file(self.path / METRICS) != want)

    # ---- checkpoint ----------------------------------------------------------------------------
    def _committed_file(self, name: str, state: dict | None) -> Path:
        """The file that holds the committed version of `name` (the `.next` file if not yet renamed)."""
        want = (state or {}).get("files", {}).get(name)
        nxt = self.path / f"{name}.next"
        if want and nxt.exists() and sha256_file(nxt) == want:
            return nxt
        return self.path / name

    def clean_temp(self) -> list[str]:
        """Writer-side: delete `.*.tmp` files that interrupted atomic writes left in the run folder (only the
        lock holder writes there, so any temp file is stale) and in tables/ (analyses may write there at any
        time, so only those older than ten minutes). Returns their names."""
        self.store.check_writable(self.id)
        gone, cutoff = [], time.time() - STALE_TABLE_TMP_S
        for p in list(self.path.glob(".*.tmp")) + list((self.path / TABLES).glob(".*.tmp")):
            with contextlib.suppress(FileNotFoundError):
                if p.parent.name == TABLES and p.stat().st_mtime > cutoff:
                    continue
                p.unlink()
                gone.append(p.name)
        return gone

    def _recover(self) -> None:
        """Writer-side: drop stale temp files, finish an interrupted checkpoint commit, or drop an uncommitted
        one."""
        self.clean_temp()
        state = self._read_json(STATE, missing_ok=True)
        for name in (MODEL, OPTIM):
            nxt = self.path / f"{name}.next"
            if nxt.exists():
                if state and sha256_file(nxt) == state.get("files", {}).get(name):
                    os.replace(nxt, self.path / name)
                else:
                    nxt.unlink()

    def has_checkpoint(self) -> bool:
        return (self.path / STATE).exists()

    def save_checkpoint(self, model_tensors: dict, optim_tensors: dict, state: dict[str, Any]) -> None:
        """Write model + optimizer tensors and the JSON resume state as one atomic checkpoint."""
        self._recover()
        meta = {"run_id": self.id, "epoch": str(state.get("epoch"))}
        files = {}
        for name, tensors in ((MODEL, model_tensors), (OPTIM, optim_tensors)):
            data = safetensors_bytes(tensors, meta)
            atomic_write_bytes(self.path / f"{name}.next", data)
            files[name] = hashlib.sha256(data).hexdigest()
        atomic_write_json(self.path / STATE, dict(state, files=files, saved=now_iso()))  # commit point
        for name in files:
            os.replace(self.path / f"{name}.next", self.path / name)
        self.update_info(weights={"sha256": files[MODEL], "epoch": state.get("epoch")})

    @property
    def has_weights(self) -> bool:
        """Whether model.safetensors (or its committed `.next`) is present; shipped results may lack it."""
        return (self.path / MODEL).exists() or (self.path / f"{MODEL}.next").exists()

    @property
    def has_code_diff(self) -> bool:
        """Whether the run records the uncommitted diff it was trained with (code.diff, `record_code`): a run of a
        dirty tree with it can be re-created (check out its commit, apply the diff); one without, not surely."""
        return (self.path / CODE_DIFF).is_file()

    def _load_tensors(self, name: str, state: dict | None, verify: bool = True) -> dict:
        from safetensors.torch import load

        p = self._committed_file(name, state)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            info = self.info
            if name == MODEL and (self.store.readonly or info.get("status") == "finished"):
                raise StoreError(f"the weights are not shipped with this run ({p} is absent; only its results "
                                 f"are); re-create them with `workbench recreate {self.id}`", self.id, name) from None
            raise StoreError(f"missing ({self._rel(name)}); the run has no checkpoint "
                             f"(status {self.status!r})", self.id, name) from None
        except OSError as e:
            raise StoreError(f"unreadable ({self._rel(p)}): {e.strerror or e}", self.id, name) from None
        want, source = (state or {}).get("files", {}).get(name), STATE
        if not want and name == MODEL:
            want, source = (self.info.get("weights") or {}).get("sha256"), f"{INFO} (weights.sha256)"
        if verify and want and hashlib.sha256(data).hexdigest() != want:
            raise StoreError(f"corrupted: sha256 differs from the one recorded in {source} ({self._rel(p)})", self.id,
                             name)
        if verify and not want:
            warnings.warn(f"run {self.id!r}: {name} cannot be verified: no sha256 recorded in {STATE} or {INFO} "
                          "(a run saved by an older PE-Lab, or its state.json was lost)", stacklevel=3)
        try:
            return load(data)
        except Exception as e:  # safetensors raises its own error types
            raise StoreError(f"corrupted safetensors file ({self._rel(p)}): {e}", self.id, name) from None

    def load_checkpoint(self) -> tuple[dict, dict, dict] | None:
        """(model_tensors, optim_tensors, state) of the last committed epoch, or None if none. Writer-side:
        finishes an interrupted commit first."""
        self._recover()
        state = self._read_json(STATE, missing_ok=True)
        if state is None:
            return None
        return self._load_tensors(MODEL, state), self._load_tensors(OPTIM, state), state

    def state(self) -> dict[str, Any] | None:
        return self._read_json(STATE, missing_ok=True)

    def checkpoint_stamp(self) -> str:
        """A key that changes with every committed checkpoint (state.json's mtime; "-" without one): for caching
        a loaded model."""
        p = self.path / STATE
        return str(p.stat().st_mtime_ns) if p.exists() else "-"

    def table_stamps(self) -> dict[str, int]:
        """{file name: mtime (ns)} of the run's own table files (`tables/*.parquet`): what an analysis job wrote."""
        d = self.path / TABLES
        return {p.name: p.stat().st_mtime_ns for p in d.glob("*.parquet")} if d.is_dir() else {}

    def model_tensors(self) -> dict:
        """The weights as a {name: tensor} dict, verified against the sha256 in state.json, else the one in
        run.json; a warning says when neither exists."""
        state = self._read_json(STATE, missing_ok=True)
        return self._load_tensors(MODEL, state if isinstance(state, dict) and isinstance(
            state.get("files", {}), dict) else None)

    # ---- model and data ------------------------------------------------------------------------
    def model_config(self):
        from workbench.model import ModelConfig

        try:
            return ModelConfig.from_dict(dict(self.config["model"]))
        except (TypeError, ValueError) as e:
            raise StoreError(f"invalid model section: {e}", self.id, CONFIG) from None

    def load_model(self, device: str = "cpu"):
        """The trained PEClassifier in eval mode on `device`."""
        from workbench.model import PEClassifier

        model = PEClassifier(self.model_config())
        tensors = self.model_tensors()
        try:
            model.load_state_dict(tensors, strict=True)
        except RuntimeError as e:
            raise StoreError(f"weights do not fit the model config: {e}", self.id, MODEL) from None
        return model.to(device).eval()

    def load_dataset(self):
        """The run's Dataset (synthetic_tasks), from the store's data cache."""
        ds = self.store.load_task(self.config["task"])
        recorded = self.info.get("dataset_hash")
        if recorded and recorded != ds.hash:
            warnings.warn(f"run {self.id!r} was trained on dataset {recorded}, but its task spec now generates "
                          f"{ds.hash} (the generator changed?)", stacklevel=2)
        return ds

    # ---- analysis tables -----------------------------------------------------------------------
    def _table_path(self, name: str) -> Path:
        if not _TABLE_NAME.match(name):
            raise ValueError(f"table name {name!r} may only contain letters, digits, '_', '.', '-'")
        return self.path / TABLES / f"{name}.parquet"

    def save_table(self, name: str, df: "pd.DataFrame", provenance: dict[str, Any] | None | str = "now") -> Path:
        """Store an analysis table as tables/<name>.parquet (atomically; replaces an older one), with what made it:
        "now" (`table_provenance`: code version, time, CPU, numerics and threads, the weights it was computed from:
        run.json's `weights` record, sha256 and epoch, and the analysis's `parameters` within `table_parameters`),
        or the record of the table it copies (None: not known)."""
        self.store.check_writable(self.id)
        weights = self.info.get("weights") if provenance == "now" else None
        params = _PARAMETERS.get() if provenance == "now" else None
        made = (table_provenance() | ({"weights": weights} if weights else {})
                | ({"parameters": params} if params else {})) if provenance == "now" else provenance
        return atomic_write_bytes(self._table_path(name), parquet_bytes(df, made))

    def provenance_of(self, name: str) -> dict[str, Any] | None:
        """What made table `name` (`table_provenance`), from its own file or the bundle's record; None where it was
        saved before tables recorded it."""
        p = self.table_file(name)
        try:
            return (bundle_provenance(p).get(name) if p.name == BUNDLE else parquet_provenance(p))
        except Exception as e:
            raise StoreError(f"corrupted parquet ({self._rel(p)}): {e}", self.id, self._rel(p).split("/", 1)[1]) \
                from None

    def table_file(self, name: str) -> Path:
        """The file that holds table `name`: its own `tables/<name>.parquet`, else the run's bundle
        `tables.parquet` (shipped runs, `workbench.store.bundle`); StoreError when neither has it."""
        p = self._table_path(name)
        if p.exists():
            return p
        if name in self._bundled():
            return self.path / BUNDLE
        raise StoreError(f"no table {name!r}; stored tables: {self.tables() or 'none'}", self.id,
                         f"{TABLES}/{name}.parquet")

    def load_table(self, name: str) -> "pd.DataFrame":
        import pandas as pd

        p = self.table_file(name)
        try:
            return read_bundle_table(p, name) if p.name == BUNDLE else pd.read_parquet(p)
        except Exception as e:
            raise StoreError(f"corrupted parquet ({self._rel(p)}): {e}", self.id, self._rel(p).split("/", 1)[1]) \
                from None

    def _bundled(self) -> list[str]:
        """Tables in the run's bundle (footer only); StoreError when the bundle is damaged."""
        p = self.path / BUNDLE
        if not p.exists():
            return []
        try:
            names = bundle_names(p)
        except Exception as e:
            raise StoreError(f"corrupted parquet ({self._rel(p)}): {e}", self.id, BUNDLE) from None
        self.verify_shipped()
        return names

    def tables(self) -> list[str]:
        d = self.path / TABLES
        own = {p.stem for p in d.glob("*.parquet")} if d.is_dir() else set()
        return sorted(own | set(self._bundled()))

    def has_table(self, name: str) -> bool:
        return self._table_path(name).exists() or name in self._bundled()

    def verify_shipped(self) -> None:
        """StoreError "damaged: FILE changed since it was shipped" when a run of a read-only (shipped) store has
        a manifest (`manifest.py`, written by `ship`) that its files no longer match. A run without one, or in a
        writable store (a user's copy, which its writers may change), is not checked."""
        if self.store.readonly and (self.path / MANIFEST).exists():
            verify_manifest(self.path, self.id)

    def check(self) -> None:
        """Read everything a report reads (config, run.json, metrics, every table file's parquet footer, the
        shipped manifest); StoreError naming the file on the first that is corrupted. Cheap: tables are not
        decoded (a shipped run's manifest covers their bytes)."""
        self.summary()
        self.check_files()

    def check_files(self) -> None:
        """`check` without config.json and run.json (the index reads those first), and metrics.jsonl against the
        sha256 its training recorded (a finished run whose curve was cut or edited would draw and read the wrong
        epochs). The weights are checked where they are loaded."""
        import pyarrow.parquet as pq

        self.metric_rows()
        if self.metrics_changed():
            raise StoreError(f"{METRICS} changed after training (its sha256 differs from the one in {INFO}); restore "
                             "it or train the run again (`--force`)", self.id, METRICS)
        self._bundled()  # reads the bundle's footer
        for p in sorted((self.path / TABLES).glob("*.parquet")):
            try:
                pq.read_metadata(p)
            except Exception as e:
                raise StoreError(f"corrupted parquet ({self._rel(p)}): {e}", self.id, self._rel(p).split("/", 1)[1]) \
                    from None

    # ---- summary -------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The index row of this run (what `RunStore.query` returns)."""
        cfg = self.config
        info = self.info
        st = info.get("status", "created")
        if st == "running" and not process_alive(info):
            st = "interrupted"
        final = info.get("final") or {}
        model, task, train = cfg["model"], cfg["task"], cfg["train"]
        for where, key, types in (("model", "scheme", (str,)), ("model", "arch", (str,)), ("task", "task", (str,)),
                                  ("train", "seed", (int,)), ("train", "epochs", (int,)), (None, "preset", (str,)),
                                  (None, "tag", (str,))):
            v = (cfg if where is None else cfg[where]).get(key)
            if v is not None and (not isinstance(v, types) or isinstance(v, bool)):
                name = key if where is None else f"{where}.{key}"
                raise StoreError(f"field {name!r} must be {types[0].__name__}, not {type(v).__name__} "
                                 f"({self._rel(CONFIG)})", self.id, CONFIG)
        for key in ("train_acc", "test_acc", "test_loss"):
            if final.get(key) is not None and (not isinstance(final[key], _NUM) or isinstance(final[key], bool)):
                raise StoreError(f"field 'final.{key}' must be a number, not {type(final[key]).__name__} "
                                 f"({self._rel(INFO)})", self.id, INFO)
        self.verify_shipped()
        return {
            "id": self.id, "scheme": model.get("scheme"), "task": task.get("task"), "arch": model.get("arch"),
            "preset": cfg.get("preset"), "seed": train.get("seed"), "tag": cfg.get("tag"), "status": st,
            "epoch": info.get("epoch", 0), "epochs": train.get("epochs"),
            "test_acc": final.get("test_acc"), "test_loss": final.get("test_loss"),
            "train_acc": final.get("train_acc"), "wall_time_s": info.get("wall_time_s"),
            "created": info.get("created"), "updated": info.get("updated"), "path": str(self.path.resolve()),
            "config": json.dumps(cfg, sort_keys=True), "error": info.get("error"),
        }


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except FileNotFoundError:
        return "-"
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def folder_stamp(path: Path) -> str:
    """Changes whenever run.json or config.json is rewritten (atomic writes replace the inode)."""
    return f"{_stat(path / INFO)}|{_stat(path / CONFIG)}"


def contents_stamp(path: Path) -> str:
    """`folder_stamp` plus the metrics, every table (bundled or one file each) and the shipped manifest: changes
    whenever anything a computation over the run reads is rewritten (the index re-reads a run when it does)."""
    tables = sorted((path / TABLES).glob("*.parquet")) if (path / TABLES).is_dir() else []
    return "|".join([folder_stamp(path), _stat(path / METRICS), _stat(path / BUNDLE), _stat(path / MANIFEST),
                     *map(_stat, tables)])
