"""Errors raised by the run store."""
from __future__ import annotations


class StoreError(Exception):
    """A run folder, or one file in it, is missing, corrupted or inconsistent.

    The message names the run and the file; `run_id` and `file` carry them for programs.
    """

    def __init__(self, message: str, run_id: str | None = None, file: str | None = None):
        where = []
        if run_id is not None:
            where.append(f"run {run_id!r}")
        if file is not None:
            where.append(f"file {file!s}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.run_id, self.file = run_id, file
