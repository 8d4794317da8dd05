"""Several run stores read as one: the user's own store first, then read-only shipped results.

    stores = StoreSet(RunStore(root), shipped=RunStore("results/repro", readonly=True))
    stores.query(scheme="rope")      # the stores' index rows + a `source` column ("own" / "shipped")
    stores.get(run_id)               # the run, from the first store whose folders hold it

Used by the dashboard and `workbench report`, so both see the same runs. An id is checked against
`RUN_ID_PATTERN` and the stores' run folders before any path is built.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import StoreError
from .run import Run
from .runstore import RunStore, check_run_id, damaged_of


def shipped_root(shipped: str | os.PathLike | None = None) -> Path | None:
    """The read-only shipped store: `shipped`, else $PELAB_SHIPPED, else `results/repro` of the current folder or
    of the source checkout this package runs from, when it exists."""
    if shipped is not None:
        return Path(shipped)
    if os.environ.get("PELAB_SHIPPED"):
        return Path(os.environ["PELAB_SHIPPED"])
    import workbench

    for base in (Path("."), Path(workbench.__file__).resolve().parent.parent):
        if (base / "results" / "repro").is_dir():
            return base / "results" / "repro"
    return None


def paper_root(shipped: str | Path) -> Path | None:
    """Where the paper-scale runs are kept: `paper/` beside the shipped store (results/paper beside results/repro);
    None when the shipped store is that folder itself (`workbench app --shipped results/paper`: its runs are the
    ones judged, with nothing beside them)."""
    root = Path(shipped).parent / "paper"
    return None if root.resolve() == Path(shipped).resolve() else root


def paper_store(root: str | Path | None) -> RunStore | None:
    """The read-only store at `root` when it holds at least one finished run, else None (also for no `root`)."""
    if root is None:
        return None
    root = Path(root)
    if not root.is_dir():
        return None
    store = RunStore(root, readonly=True)
    return store if len(store.query(status="finished")) else None


class StoreSet:
    """The user's store (`own`, writable) and an optional read-only `shipped` store."""

    def __init__(self, own: RunStore, shipped: RunStore | None = None):
        self.own, self.shipped = own, shipped
        self.sources: list[tuple[str, RunStore]] = [("own", own)] + ([("shipped", shipped)] if shipped else [])

    @classmethod
    def open(cls, root: str | os.PathLike | None = None, shipped: str | os.PathLike | None = None,
             create: bool = False) -> "StoreSet":
        """Own store at `root` (default $PELAB_RUNS or ./runs; not made when missing unless `create`) + the shipped
        store of `shipped_root(shipped)`."""
        own = RunStore(root, create=create)
        sroot = shipped_root(shipped)
        if sroot is not None and sroot.resolve() == own.root.resolve():
            sroot = None
        return cls(own, RunStore(sroot, readonly=True) if sroot is not None else None)

    @property
    def root(self) -> Path:
        return self.own.root

    def __repr__(self) -> str:
        return f"StoreSet({self.own!r}, shipped={self.shipped!r})"

    def query(self, **filters: Any):
        """Index rows of every store (own first; an id in both is the own one, before filtering: a re-creation
        still running does not let the filter `status=finished` pick the shipped copy, which `get` does not
        return), with a `source` column."""
        import pandas as pd

        frames, own = [], set(self.own.run_ids()) if self.shipped is not None else set()
        for name, store in self.sources:
            df = store.query(**filters)
            if name != "own":
                df = df[~df["id"].isin(own)]
            frames.append(df.assign(source=pd.Series([name] * len(df), index=df.index, dtype=object)))
        frames = [f for f in frames if len(f)] or frames[:1]  # an empty frame would turn every column to object
        df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        return df.drop_duplicates("id", keep="first").reset_index(drop=True)

    def damaged(self, **filters: Any) -> dict[str, str]:
        """{run id: why} for every run of either store that cannot be read or changed since it was shipped
        (`RunStore.damaged`): the one list the Runs page, the pickers, Findings and the report name."""
        return damaged_of(self.query(status="corrupt", **filters))

    def store_of(self, run_id: str) -> tuple[str, RunStore]:
        """(source, store) holding `run_id`; StoreError "unknown run" otherwise."""
        check_run_id(run_id)
        for name, store in self.sources:
            if run_id in store.run_ids():
                return name, store
        where = " or ".join(f"the {name} store ({s.root.name}/)" for name, s in self.sources)  # no server paths
        raise StoreError(f"unknown run {run_id!r}: not in {where} (see `workbench runs`)")

    def get(self, run_id: str) -> Run:
        return self.store_of(run_id)[1].get(run_id)

    def exists(self, run_id: str) -> bool:
        try:
            self.store_of(run_id)
            return True
        except StoreError:
            return False


def finished_runs(store: "RunStore | StoreSet", **filters: Any) -> tuple[list[Run], dict[str, str]]:
    """(finished runs whose files read, {run id: why} for the runs that cannot be read): those the index lists as
    `corrupt` and finished ones with a corrupted metrics.jsonl or table (`Run.check`). Reports compute from the
    first and list the second, so one damaged run never aborts them nor vanishes silently."""
    df = store.query(status=["finished", "corrupt"], **filters)
    runs, corrupt = [], damaged_of(df)
    for rid in df.loc[df["status"] == "finished", "id"]:
        try:
            run = store.get(rid)
            run.check()
        except StoreError as e:
            corrupt[rid] = str(e)
            continue
        runs.append(run)
    return runs, corrupt
