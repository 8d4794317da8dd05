"""Per-run OS lock: one process at a time trains a run, or analyses and ships it.

`<root>/.locks/<run_id>.lock` is locked with `fcntl.flock(LOCK_EX | LOCK_NB)` for the life of the training
process (the kernel drops it when the process dies, even on `kill -9`); `workbench ship` holds it while it
analyses and ships a run. The file lives outside the run folder so deleting the run (`--force`) cannot orphan the
lock, and it records the holder's pid/host and what it is doing ("trained", "shipped") for the message a second
process gets. The holder writes them just after it takes the lock, so a process refused in between waits for them
briefly (HOLDER_WAIT_S) rather than naming "pid ?".
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from .errors import StoreError

LOCKS = ".locks"
HOLDER_WAIT_S = 2.0  # how long a refused trainer waits for the holder to write its pid / host / since


class RunLocked(StoreError):
    """Another live process holds the run's lock."""


def lock_path(root: str | os.PathLike, run_id: str) -> Path:
    return Path(root) / LOCKS / f"{run_id}.lock"


def _holder(path: Path, wait_s: float = 0.0) -> dict[str, Any]:
    """The holder's {"pid", "host", "since", "doing"} from the lock file; "?" where unreadable, and "doing" is
    "trained" unless the holder wrote another. With `wait_s`, polls that long for a holder that has the lock but
    has not written them yet (a write that lands after the flock)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            info = json.loads(path.read_text(encoding="utf-8") or "{}")
            info = info if isinstance(info, dict) else {}
        except (OSError, ValueError):  # missing, or caught between the holder's truncate and write
            info = {}
        if "pid" in info or time.monotonic() >= deadline:
            return {"pid": "?", "host": "?", "since": "?", "doing": "trained", **info}
        time.sleep(0.02)


class RunLock:
    """`with RunLock(root, run_id):` -- held until released or the process ends. Raises `RunLocked` at once
    (no waiting) when another process holds it. `doing` ("trained", "shipped") names the holder's work in the
    message another process gets."""

    def __init__(self, root: str | os.PathLike, run_id: str, doing: str = "trained"):
        self.path, self.run_id, self.doing = lock_path(root, run_id), run_id, doing
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            h = _holder(self.path, HOLDER_WAIT_S)
            raise RunLocked(f"is being {h['doing']} by pid {h['pid']} on {h['host']} (since {h['since']}; lock "
                            f"{self.path}); wait for it to finish or stop that process", self.run_id) from None
        from .run import now_iso

        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso(),
                                   "doing": self.doing}).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lock_holder(root: str | os.PathLike, run_id: str) -> dict[str, Any] | None:
    """{"pid", "host", "since", "doing"} of the process training (or shipping) `run_id`, or None when nobody holds
    its lock."""
    path = lock_path(root, run_id)
    if not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(path, HOLDER_WAIT_S)
    finally:
        os.close(fd)  # closing drops a lock we got
    return None
