"""The run store: the only code that knows where files live.

    store = RunStore(root)                 # default $PELAB_RUNS or ./runs; datasets in $PELAB_DATA or <root>/../data_cache
    run = store.get(run_id)
    df = store.query(scheme="rope", task="trigger-distance", status="finished")
    run.config, run.status, run.metrics(), run.load_model("cpu"), run.load_dataset()
    run.save_table("ablation", df); run.load_table("ablation"); run.tables()

Everything is written atomically; nothing is ever unpickled. Broken files raise `StoreError`,
whose message names the run and the file.
"""
from .atomic import atomic_write, atomic_write_bytes, atomic_write_json, atomic_write_text
from .errors import StoreError
from .run import STATUSES, Run
from .runstore import (COLUMNS, FILTERS, RunStore, canonical_json, code_version, config_hash, default_root,
                       run_id_for)

__all__ = ["RunStore", "Run", "StoreError", "STATUSES", "COLUMNS", "FILTERS", "atomic_write", "atomic_write_bytes",
           "atomic_write_json", "atomic_write_text", "canonical_json", "code_version", "config_hash",
           "default_root", "run_id_for"]
