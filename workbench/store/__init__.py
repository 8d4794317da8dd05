"""The run store: the only code that knows where files live.

    store = RunStore(root)                 # default $PELAB_RUNS or ./runs; datasets in $PELAB_DATA or <root>/../data_cache
    run = store.get(run_id)
    df = store.query(scheme="rope", task="trigger-distance", status="finished")
    run.config, run.status, run.metrics(), run.load_model("cpu"), run.load_dataset()
    run.save_table("ablation", df); run.load_table("ablation"); run.tables()
    RunStore(root, readonly=True)          # shipped results: never writes (no index file, temp files or locks)
    StoreSet.open(root, shipped)           # own store + read-only shipped store, read as one (dashboard, report)
    paper_root("results/repro")         # results/paper: the paper-scale (GPU) runs beside a shipped store
    runs, corrupt = finished_runs(store)   # finished runs that read + {run id: why} for those that do not
    stores.damaged()                       # {run id: why} of every run that cannot be read or changed since shipped
    RunStore(root, create=False)           # reading commands and the dashboard: a missing root is not made
    with store.lock(run_id): ...           # the per-run OS lock a trainer holds (RunLocked if taken)

Everything is written atomically; nothing is ever unpickled. Broken files raise `StoreError`,
whose message names the run and the file. A shipped run carries `manifest.json` (`manifest.py`): a read-only store
refuses a run whose files changed since it was shipped ("damaged: FILE changed since it was shipped").
"""
from .atomic import atomic_write, atomic_write_bytes, atomic_write_json, atomic_write_text
from .errors import StoreError
from .lock import RunLock, RunLocked, lock_holder
from .run import LISTED_STATUSES, STATUSES, Run
from .runstore import (COLUMNS, FILTERS, RUN_ID_PATTERN, RunStore, canonical_json, check_run_id, code_version,
                       config_hash, default_root, flat_config, run_id_for, with_later_defaults)
from .manifest import check_store, write_manifest
from .ship import is_dirty
from .stores import StoreSet, finished_runs, paper_root, paper_store, shipped_root

__all__ = ["RunStore", "Run", "StoreError", "StoreSet", "RunLock", "RunLocked", "lock_holder", "STATUSES",
           "LISTED_STATUSES", "COLUMNS", "FILTERS", "RUN_ID_PATTERN", "atomic_write", "atomic_write_bytes",
           "atomic_write_json", "atomic_write_text", "canonical_json", "check_run_id", "code_version",
           "config_hash", "default_root", "finished_runs", "flat_config", "paper_root", "paper_store", "run_id_for",
           "shipped_root", "with_later_defaults", "check_store", "write_manifest", "is_dirty"]
