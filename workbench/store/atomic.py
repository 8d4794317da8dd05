"""Atomic file writes: temp file in the same directory, fsync, `os.replace`, fsync the directory.

A reader (or a crash, or `kill -9`) sees either the old file or the new one, never a truncated mix.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp makes 0600


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (SIGINT) held until the block's writes are done, then raised: several files written as one record
    (an epoch's metrics, checkpoint and run.json) are never left at different epochs by it. Outside the main
    thread (where Python delivers signals) it does nothing; `kill -9` is what the checkpoint journal is for."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[Any] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None], mode: str = "wb") -> Path:
    """Call `write(fileobj)` on a temp file next to `path`, then atomically move it onto `path`.

    If `write` raises, the temp file is removed and `path` keeps its old content.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:  # named by the file asked for, not the temp file nobody asked for
        why = {errno.EEXIST: "a file is where a folder should be", errno.ENOTDIR: "a file is where a folder should be",
               errno.EACCES: "its folder is not writable", errno.EROFS: "its folder is on a read-only file system",
               errno.EPERM: "its folder is not writable"}.get(e.errno, e.strerror or str(e))
        raise OSError(e.errno, f"{why}; pass another path", str(path)) from None
    try:
        os.chmod(tmp, _FILE_MODE)
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data), "wb")


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, lambda f: f.write(text), "w")


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (Path, os.PathLike)):
        return os.fspath(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def stat_key(path: str | os.PathLike) -> tuple | None:
    """(inode, size, mtime, ctime) of a file, to memoise what was read from it (OSError when it is missing). A file
    replaced by an atomic write is a new inode. None while the file may still change unseen: changed in the last 2 s,
    since a rewrite in place within one tick of the file system's clock keeps its mtime (git's "racily clean" rule)."""
    st = os.stat(path)
    if time.time_ns() - st.st_mtime_ns <= 2_000_000_000:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
