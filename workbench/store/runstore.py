"""`RunStore`: the run folders under one root, and their SQLite index.

The folders are the truth; `<root>/index.sqlite` is a cache of one row per run that `query` keeps in step
with them: before each query it stats every run folder's run.json/config.json and re-reads the folders
whose files changed, appeared or vanished (and re-checks runs marked `running` whose process may have
died). A missing, corrupted or old-schema index is rebuilt from the folders; when the index file cannot be
used at all (e.g. `index.sqlite` is a directory, or the root is not writable) an in-memory index is built from
the folders instead. Every index write is one SQLite transaction.

`RunStore(root, readonly=True)` never writes: no index file, no temp files, no locks; runs are listed by
scanning the folders and every write API raises `StoreError("read-only store ...")`.

Run ids are one path component matching `RUN_ID_PATTERN`; `get` refuses anything else, so no id (from a
command line or a request) ever names a path outside the store.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import warnings
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from .atomic import atomic_write_json
from .errors import StoreError
from .lock import RunLock, lock_holder
from .run import CONFIG, INFO, Run, contents_stamp, now_iso

INDEX = "index.sqlite"
SCHEMA_VERSION = "2"  # 2: a row's stamp covers metrics, tables and the manifest; finished rows are checked
COLUMNS = ["id", "scheme", "task", "arch", "preset", "seed", "tag", "status", "epoch", "epochs", "test_acc",
           "test_loss", "train_acc", "wall_time_s", "created", "updated", "path", "config", "error"]
FILTERS = ("scheme", "task", "arch", "preset", "seed", "status", "tag")
TASK_SHORT = {"trigger-distance": "t1", "trigger-count": "t2"}
DEFAULT_DATA_SEED = 42  # every preset's task.seed; a run id names another one (`d43`)
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")  # one path component, no '.', '..', '/'


def check_run_id(run_id: object) -> str:
    """`run_id` if it is a well-formed run id, else StoreError (it never becomes a path)."""
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
        raise StoreError(f"unknown run {str(run_id)[:80]!r}: run ids are letters, digits, '.', '_' and '-' "
                         "(see `workbench runs`)")
    return run_id

_SQL_TYPES = {"seed": "INTEGER", "epoch": "INTEGER", "epochs": "INTEGER", "test_acc": "REAL", "test_loss": "REAL",
              "train_acc": "REAL", "wall_time_s": "REAL"}


def default_root() -> Path:
    return Path(os.environ.get("PELAB_RUNS", "runs"))


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# Train keys added after the first runs were stored, with the value that reproduces those runs.
LATER_TRAIN_DEFAULTS: dict[str, Any] = {"ignore_label": None, "fused_attention": False, "train_eval": "every"}


def _later_defaults() -> tuple[tuple[str, dict[str, Any]], ...]:
    from workbench.model.config import LATER_DEFAULTS

    return ("model", LATER_DEFAULTS), ("train", LATER_TRAIN_DEFAULTS)


def config_hash(config: dict[str, Any]) -> str:
    """sha256 over what determines the result: the model, task and train sections (not preset/tag labels).
    Fields added later are left out while they hold the value older runs implicitly had, so those runs keep
    their ids; any other value enters the hash."""
    core = {k: config[k] for k in ("model", "task", "train")}
    for section, later in _later_defaults():
        core[section] = {k: v for k, v in core[section].items() if not (k in later and v == later[k])}
    return hashlib.sha256(canonical_json(core).encode()).hexdigest()


def with_later_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with each field added after it was stored set to the value that run implicitly had, so two
    configs written before and after a field existed compare equal where they trained alike."""
    out = dict(config)
    for section, later in _later_defaults():
        out[section] = later | (config.get(section) or {})
    return out


def flat_config(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config as {dotted key: leaf value} ({'model': {'d_model': 64}} -> {'model.d_model': 64}), each field
    added after it was stored set to its implicit value (`with_later_defaults`); a list is a leaf, an empty section
    has none (`scheme_kwargs: {}` is no field). Where runs are compared field by field: `analyze --aggregate`, the
    dashboard's runs page, the one-setting claims."""
    def leaves(d: dict[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    return leaves(with_later_defaults(config), "")


def _slug(s: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", str(s)).strip("_-") or "x"


def run_id_for(config: dict[str, Any]) -> str:
    """Readable and unique: `t1-rope-cpu-s42-1a2b3c` (task, tag or scheme, [arch if not paper], preset, training
    seed, [`d<data seed>` if not the default 42], 6 hex of the config hash). The same config always gives the same
    id."""
    model, task, train = config["model"], config["task"], config["train"]
    name = task.get("task", "task")
    parts = [TASK_SHORT.get(name, _slug(name)), _slug(config.get("tag") or model.get("scheme"))]
    if model.get("arch", "paper") != "paper":
        parts.append(_slug(model["arch"]))
    parts += [_slug(config.get("preset") or "custom"), f"s{train.get('seed')}"]
    if task.get("seed", DEFAULT_DATA_SEED) != DEFAULT_DATA_SEED:
        parts.append(f"d{task['seed']}")
    parts.append(config_hash(config)[:6])
    return "-".join(parts)


# changes here cannot change a trained run: shipped results, docs, tests and notebooks do not make a tree dirty
NOT_CODE = ("results", "docs", "tests", "notebooks", "*.md")


def git_version(src: Path) -> str | None:
    """`git describe` of the repository at `src` (+ `-dirty` when a tracked file outside NOT_CODE changed),
    None outside git. Uses --no-optional-locks so it never writes to the repository."""
    try:
        git = ["git", "--no-optional-locks", "-C", str(src)]
        desc = subprocess.run(git + ["describe", "--always", "--tags"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no", "--", "."] + _excludes(),
                               capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (f"{desc}-dirty" if dirty else desc) or None


def _source_tree() -> Path:
    """The folder that holds the `workbench` package: the repository, in a checkout."""
    return Path(__file__).resolve().parent.parent.parent


@lru_cache(maxsize=4096)
def contains_commit(code: str | None, commit: str, src: Path | None = None) -> bool | None:
    """Whether the code version `code` (a `code_version`: a commit, `tag-N-g<hash>`, either with `-dirty`) has
    `commit` in its history, by git ancestry in the repository at `src` (default: this source tree); None where
    git cannot tell (no git or no repository, either commit unknown here: a shallow clone, another fork)."""
    code = (code or "").removesuffix("-dirty")
    if not re.fullmatch(r"[\w.][\w./-]*", code) or not re.fullmatch(r"[0-9a-f]{4,40}", commit):
        return None  # not a version git could name (`pe-lab 0.1`), nor one read as an option
    src = src or _source_tree()
    try:
        rc = subprocess.run(["git", "--no-optional-locks", "-C", str(src), "merge-base", "--is-ancestor", commit,
                             code], capture_output=True, timeout=10).returncode
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(rc)


def _excludes() -> list[str]:
    return [f":(exclude){p}" for p in NOT_CODE]


@lru_cache(maxsize=1)
def code_diff() -> str | None:
    """`git diff HEAD` of the tracked files outside NOT_CODE (what makes `code_version` `-dirty`), None outside
    git or when there is none; read once per process, like `code_version`."""
    src = _source_tree()
    try:
        out = subprocess.run(["git", "--no-optional-locks", "-C", str(src), "diff", "HEAD", "--", "."] + _excludes(),
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


@lru_cache(maxsize=1)
def code_version() -> str:
    """The source tree's `git_version`; where the tree has no git (a copy sent to a lent GPU, which carries no
    .git), $PELAB_CODE_VERSION as the sender wrote it (benchmarks/gpu_window.sh: the commit it was sent from);
    else the package version. Read once per process (the code a process runs is what it imported: a sweep worker
    reads it when it starts, `train.workers._worker`)."""
    import workbench

    return (git_version(_source_tree()) or os.environ.get("PELAB_CODE_VERSION")
            or f"pe-lab {workbench.__version__}")


def damaged_of(df) -> dict[str, str]:
    """{id: error} of an index frame's `corrupt` rows."""
    rows = df[df["status"] == "corrupt"]
    return {rid: err or f"run {rid!r}: unreadable" for rid, err in zip(rows["id"], rows["error"])}


def check_config_id(run: Run) -> None:
    """StoreError when the run's config.json gives another run id than its folder's: the config was edited after
    the run was created (its weights and metrics are of the config the id names). A config too damaged to give an
    id is left to the checks that name what is wrong with it."""
    try:
        want = run_id_for(run.config)
    except StoreError:
        raise
    except Exception:
        return
    if want != run.id:
        raise StoreError(f"{CONFIG} gives the run id {want}, not its folder's: it was edited after the run was "
                         f"created, so it no longer describes the run's weights and metrics; restore it (e.g. `git "
                         f"checkout` for a shipped run), or train the edited config as a run of its own", run.id,
                         CONFIG)


class RunStore:
    """All runs under `root` (default: $PELAB_RUNS or ./runs). Datasets are cached in `data_dir`
    (default: $PELAB_DATA or `<root>/../data_cache`)."""

    def __init__(self, root: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
                 readonly: bool = False, create: bool = True):
        """create=False (reading commands, the dashboard): a missing root is not made; the store lists no runs
        until something is trained into it (`create` of a run makes the folder). `created` says whether this
        call made the root."""
        self.root = Path(root) if root is not None else default_root()
        self.readonly = readonly
        self.created = False
        if readonly:
            if not self.root.is_dir():
                raise StoreError(f"read-only store {self.root} is not a folder")
        elif create or self.root.exists():
            if self.root.exists() and not self.root.is_dir():
                raise StoreError(f"cannot use {self.root} as the run store: it is a file, not a folder; pass --root "
                                 "(or set $PELAB_RUNS) to a folder")
            self.created = not self.root.exists()
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot use {self.root} as the run store: {e.strerror or e}; "
                                 "pass --root (or set $PELAB_RUNS) to a writable folder") from None
            if not self.root.is_dir():
                raise StoreError(f"cannot use {self.root} as the run store: not a folder; pass --root (or set "
                                 "$PELAB_RUNS) to a writable folder")
        if data_dir is None:
            data_dir = os.environ.get("PELAB_DATA") or (self.root.resolve().parent / "data_cache")
        self.data_dir = Path(data_dir)
        self.index_path = self.root / INDEX
        self._datasets: dict[str, Any] = {}
        self._memory: sqlite3.Connection | None = None  # in-memory index (read-only store or unusable file)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r}{', readonly=True' if self.readonly else ''})"

    def check_writable(self, run_id: str | None = None) -> None:
        """StoreError when this store is read-only (every write API calls this first)."""
        if self.readonly:
            raise StoreError(f"read-only store {self.root}: runs here cannot be changed; train or analyse them "
                             "in your own store (--root)", run_id)

    # ---- runs ----------------------------------------------------------------------------------
    def run_id(self, config: dict[str, Any]) -> str:
        return run_id_for(config)

    def exists(self, run_id: str) -> bool:
        return bool(RUN_ID_PATTERN.match(run_id)) and (self.root / run_id / CONFIG).exists()

    def get(self, run_id: str) -> Run:
        """The run with this id. StoreError if the id is malformed, there is no such run folder or its config or
        run.json is unreadable (so a caller that got a Run can read its status)."""
        check_run_id(run_id)
        if not (self.root / run_id).is_dir():
            near = [r for r in self.run_ids() if run_id in r][:5]
            hint = f"; did you mean {near}?" if near else ""
            raise StoreError(f"no such run in {self.root}{hint}", run_id)
        run = Run(self, run_id)
        run.config  # noqa: B018 - raises StoreError naming config.json when missing or corrupted
        run.info  # noqa: B018 - the same for run.json
        run.verify_shipped()  # a shipped run whose files changed since it was shipped is never read
        check_config_id(run)
        return run

    def own_file(self, name: str) -> Path:
        """A file the store keeps beside its runs (the demo's report.html and demo.log): `root/name`. StoreError
        when `name` is not one file name or names a run."""
        if not RUN_ID_PATTERN.match(name) or name == INDEX or (self.root / name).is_dir():
            raise StoreError(f"{name!r} cannot be a file of the store {self.root}: give one file name, not a path, "
                             f"the index or a run's folder")
        return self.root / name

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(e.name for e in os.scandir(self.root)
                      if e.is_dir() and RUN_ID_PATTERN.match(e.name) and e.name not in ("tables", INDEX))

    def contents_stamp(self) -> str:
        """A key that changes whenever a run is added or removed or any run's config, run.json, metrics or tables
        are rewritten: for caching what is computed from the whole store (the Findings page's claims)."""
        h = hashlib.sha256()
        for rid in self.run_ids():
            h.update(f"{rid}|{contents_stamp(self.root / rid)}\n".encode())
        return h.hexdigest()

    def damaged(self, **filters: Any) -> dict[str, str]:
        """{run id: why} for every run that cannot be read: files that do not parse, a finished run's metrics or
        tables that do not read, a shipped run changed since it was shipped ("damaged: FILE changed since it was
        shipped"). What every surface lists beside what it computes from the other runs."""
        return damaged_of(self.query(status="corrupt", **filters))

    def runs(self, **filters: Any) -> list[Run]:
        """Run handles matching the filters (see `query`)."""
        return [Run(self, rid) for rid in self.query(**filters)["id"]]

    def create(self, config: dict[str, Any]) -> Run:
        """Create the run folder for `config` (config.json + run.json with status `created`), or return the
        existing run with the same config. StoreError if a folder with this id holds a different config."""
        self.check_writable()
        for section in ("model", "task", "train"):
            if not isinstance(config.get(section), dict):
                raise ValueError(f"run config needs a {section!r} section (dict); got keys {sorted(config)}")
        run_id = check_run_id(self.run_id(config))
        run = Run(self, run_id)
        if (run.path / CONFIG).exists():
            if config_hash(run.config) != config_hash(config):
                raise StoreError(f"exists with a different config ({run.path / CONFIG})", run_id, CONFIG)
            return run
        left = sorted(p.name for p in run.path.iterdir()) if run.path.is_dir() else []
        if left:  # never taken for this run's: a run.json left there would read "finished" with nothing trained
            raise StoreError(f"its folder holds {', '.join(left[:4])}{' ...' if len(left) > 4 else ''} but no "
                             f"{CONFIG} (a delete cut short, or files put there by hand): nothing there is a run; "
                             "delete the folder (`workbench train ... --force` does) and train again", run_id)
        run.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(run.path / CONFIG, config)
        stamp = now_iso()
        atomic_write_json(run.path / INFO, {"id": run_id, "status": "created", "created": stamp,
                                            "updated": stamp, "epoch": 0, "code_version": code_version()})
        run._config = None
        self._index_run(run)
        return run

    def lock(self, run_id: str, doing: str = "trained") -> RunLock:
        """The run's OS lock (not yet acquired); see `workbench.store.lock`."""
        self.check_writable(run_id)
        return RunLock(self.root, check_run_id(run_id), doing)

    def delete(self, run_id: str, lock: RunLock | None = None) -> None:
        """Delete a run folder. Refused (StoreError) while another process trains it, unless `lock` is the
        run's lock held by the caller."""
        self.check_writable(run_id)
        check_run_id(run_id)
        if not (lock is not None and lock.held and lock.run_id == run_id):
            holder = lock_holder(self.root, run_id)
            if holder:
                raise StoreError(f"cannot delete: it is being {holder['doing']} by pid {holder['pid']} on "
                                 f"{holder['host']}; stop that process first", run_id)
        path, aside = self.root / run_id, self.root / f".{run_id}.deleting"
        if path.is_dir():  # renamed out of the store first: a delete cut short leaves no half-run under its id
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(path, aside)
        self._with_index(lambda c: c.execute("DELETE FROM runs WHERE id = ?", (run_id,)))
        shutil.rmtree(aside, ignore_errors=True)

    # ---- data ----------------------------------------------------------------------------------
    def load_task(self, task: dict[str, Any]):
        """Dataset for a run config's task section {"task", "preset", "seed", "overrides"} (memoised; a read-only
        store reads the data cache when it has the dataset and otherwise generates it in memory, writing nothing)."""
        key = canonical_json(task)
        if key not in self._datasets:
            from synthetic_tasks import CacheError, cache_path, generate, load_dataset, load_or_generate, spec_of_task

            spec = spec_of_task(task)
            if not self.readonly:
                self._datasets[key] = load_or_generate(spec, self.data_dir)
            else:  # a read-only store writes nothing, a data cache included: read one that exists, else generate
                folder = cache_path(spec, self.data_dir)
                try:
                    self._datasets[key] = load_dataset(folder, spec) if os.path.exists(folder) else generate(spec)
                except CacheError:
                    self._datasets[key] = generate(spec)
        return self._datasets[key]

    # ---- index ---------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.index_path, timeout=60)
        conn.execute("PRAGMA busy_timeout = 60000")
        return conn

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        cols = ", ".join(f"{c} {_SQL_TYPES.get(c, 'TEXT')}" + (" PRIMARY KEY" if c == "id" else "")
                         for c in COLUMNS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols}, stamp TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))

    def _open_index(self) -> sqlite3.Connection:
        """A connection to a valid index, rebuilding the file if it is corrupted or has an old schema."""
        for attempt in range(2):
            conn = None
            try:
                conn = self._connect()
                with conn:
                    has = conn.execute("SELECT name FROM sqlite_master WHERE name='meta'").fetchone()
                    version = has and conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                    if not version or version[0] != SCHEMA_VERSION:
                        conn.execute("DROP TABLE IF EXISTS runs")
                        self._create_schema(conn)
                return conn
            except sqlite3.DatabaseError:
                if conn is not None:
                    conn.close()
                if attempt:
                    raise
                for suffix in ("", "-journal", "-wal", "-shm"):  # corrupted: start afresh
                    Path(f"{self.index_path}{suffix}").unlink(missing_ok=True)
        raise AssertionError("unreachable")

    @contextmanager
    def _index(self):
        """The index connection: the file, or (read-only store, unusable file) an in-memory copy."""
        if self._memory is None and not self.readonly and self.root.is_dir():  # no root yet: nothing to persist
            try:
                conn = self._open_index()
            except (sqlite3.Error, OSError) as e:
                warnings.warn(f"run store {self.root}: cannot use {self.index_path} ({e}); indexing the run "
                              "folders in memory instead (delete or fix that path to get a persistent index)",
                              stacklevel=4)
            else:
                try:
                    yield conn
                finally:
                    conn.close()
                return
        if self._memory is None:
            self._memory = sqlite3.connect(":memory:", check_same_thread=False)
            self._create_schema(self._memory)
        yield self._memory

    def _with_index(self, fn) -> Any:
        """fn(conn) in one transaction. An index file that opens but cannot be written (a read-only store or
        file, a full disk) gives way to an in-memory index, rebuilt from the run folders, as an unusable file does."""
        in_file = self._memory is None
        try:
            with self._index() as conn:
                with conn:  # one transaction
                    return fn(conn)
        except sqlite3.OperationalError as e:
            if not in_file or self._memory is not None:
                raise
            warnings.warn(f"run store {self.root}: cannot write {self.index_path} ({e}); indexing the run folders "
                          "in memory instead (make the store writable to get a persistent index)", stacklevel=3)
            self._memory = sqlite3.connect(":memory:", check_same_thread=False)
            self._create_schema(self._memory)
            with self._memory:  # empty: the next query's refresh reads every run folder into it
                return fn(self._memory)

    @staticmethod
    def _row(run: Run) -> dict[str, Any]:
        stamp = contents_stamp(run.path)
        try:
            check_config_id(run)
            row = run.summary()
            if row["status"] == "finished":  # a finished run whose metrics or tables do not read is `corrupt`
                run.check_files()
        except StoreError as e:
            status, err = "corrupt", str(e)
            if not (run.path / CONFIG).exists() and not (run.path / INFO).exists():
                status = "incomplete"
                err = (f"run {run.id!r}: creation was interrupted before {CONFIG} was written; training the same "
                       "config again recreates it")
            row = {c: None for c in COLUMNS} | {"id": run.id, "status": status, "error": err,
                                                 "path": str(run.path.resolve())}
        row["stamp"] = stamp
        return row

    @staticmethod
    def _upsert(conn: sqlite3.Connection, rows: Iterable[dict[str, Any]]) -> None:
        cols = COLUMNS + ["stamp"]
        conn.executemany(f"INSERT OR REPLACE INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         [tuple(r.get(c) for c in cols) for r in rows])

    def _index_run(self, run: Run) -> None:
        run._config = None
        if self.readonly:
            return
        row = self._row(run)
        self._with_index(lambda c: self._upsert(c, [row]))

    def reindex(self) -> int:
        """Rebuild the whole index from the run folders (one transaction). Returns the number of runs."""
        rows = [self._row(Run(self, rid)) for rid in self.run_ids()]

        def rebuild(conn):
            conn.execute("DELETE FROM runs")
            self._upsert(conn, rows)

        self._with_index(rebuild)
        return len(rows)

    def refresh(self) -> None:
        """Bring the index in step with the folders: re-read changed, new and running runs; drop vanished ones."""
        def sync(conn):
            known = {rid: (stamp, status) for rid, stamp, status in
                     conn.execute("SELECT id, stamp, status FROM runs")}
            ids = self.run_ids()
            stale = [rid for rid in ids if rid not in known or known[rid][1] == "running"
                     or known[rid][0] != contents_stamp(self.root / rid)]
            gone = set(known) - set(ids)
            if stale:
                self._upsert(conn, [self._row(Run(self, rid)) for rid in stale])
            if gone:
                conn.executemany("DELETE FROM runs WHERE id = ?", [(g,) for g in gone])

        self._with_index(sync)

    def query(self, **filters: Any):
        """Runs as a pandas DataFrame (one row per run, columns `COLUMNS`), newest first.

        Filters: scheme, task, arch, preset, seed, status, tag; each a value or a list of values (None = any).
        """
        import pandas as pd

        unknown = set(filters) - set(FILTERS)
        if unknown:
            raise ValueError(f"unknown filters {sorted(unknown)}; use {list(FILTERS)}")
        where, args = [], []
        for key, value in filters.items():
            if value is None:
                continue
            values = list(value) if isinstance(value, (list, tuple, set)) else [value]
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (str, int, float))]
            if bad:
                raise ValueError(f"filter {key}={bad[0]!r:.40}: filter values are text or numbers")
            where.append(f"{key} IN ({', '.join('?' * len(values))})")
            args += values
        self.refresh()
        sql = f"SELECT {', '.join(COLUMNS)} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created DESC, id"
        with self._index() as conn:
            df = pd.read_sql_query(sql, conn, params=args)
        # text columns hold a str or None (a corrupt row has no scheme or task): never NaN, which sorts and
        # compares as a float
        for c in (c for c in COLUMNS if c not in _SQL_TYPES):
            df[c] = df[c].astype(object).where(df[c].notna(), None)
        return df
