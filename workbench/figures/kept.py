"""Drawn figures kept by what they were drawn from: the builder, its table's content and its other arguments.

Plotly's objects are most of the CPU of a report and of a dashboard callback (10 of the 11.7 CPU-s of the smoke demo's
report). With them kept, a report built again in one process (`make demo`'s full report after its first) and a
dashboard figure shown again draw only what changed. What is kept is a drawing's output (the report's HTML, the
dashboard's figure JSON), never a Figure object a caller could change afterwards.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

import pandas as pd


def table_digest(df: pd.DataFrame) -> str | None:
    """SHA-256 of a table: its values (a column pandas cannot hash, e.g. one holding lists, by the cells' repr), index,
    column names, dtypes and attrs. None where even that fails."""
    try:
        h = hashlib.sha256(pd.util.hash_pandas_object(df.index).to_numpy().tobytes())
        for _, col in df.items():
            try:
                values = pd.util.hash_pandas_object(col, index=False)
            except TypeError:
                values = pd.util.hash_pandas_object(col.map(repr), index=False)
            h.update(values.to_numpy().tobytes())
        h.update(repr((list(df.columns), [str(t) for t in df.dtypes], list(df.index.names), df.attrs)).encode())
    except (TypeError, ValueError):
        return None
    return h.hexdigest()


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # a numpy scalar
        return value.item()
    raise TypeError(type(value).__name__)


def key_of(fn: Callable, df: pd.DataFrame, **args: Any) -> tuple | None:
    """(builder, `table_digest`, the other arguments as JSON): what a drawing is kept by. None (not kept) for a table
    without a digest or an argument that is not plain data (another table, an array)."""
    digest = table_digest(df)
    if digest is None:
        return None
    try:
        return fn, digest, json.dumps(args, sort_keys=True, default=_plain)
    except (TypeError, ValueError):
        return None


class Kept:
    """At most `size` drawings by key (`key_of`), the least recently used dropped first; a None key is never kept.
    Safe across threads (the dashboard's server answers callbacks in several)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable | None) -> Any:
        with self._lock:
            if key is None or key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable | None, value: Any) -> None:
        if key is None:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
