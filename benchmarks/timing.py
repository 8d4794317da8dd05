"""Side-by-side timing for the benchmarks: a fast path and its reference in one process, the fast path timed
before and after the reference (the better run kept), ratios of wall and process-CPU time (CPU time is the steadier
figure when other jobs share the cores)."""
from __future__ import annotations

import time


def timed(fn):
    """(wall seconds, process CPU seconds, result)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


class SideBySide:
    """`measure(name, fn)` times and prints one run; `ratio(ref, fast, again)` prints ref / the better fast run."""

    def __init__(self, width: int = 13):
        self.times: dict[str, tuple[float, float]] = {}
        self.width = width

    def measure(self, name: str, fn):
        wall, cpu, out = timed(fn)
        self.times[name] = (wall, cpu)
        print(f"{name:{self.width}s} wall {wall:8.1f} s   cpu {cpu:8.1f} s", flush=True)
        return out

    def ratio(self, ref: str, fast: str, again: str) -> None:
        best = [min(self.times[fast][k], self.times[again][k]) for k in (0, 1)]
        print(f"ratio {ref} / {fast}: wall {self.times[ref][0] / best[0]:5.1f}x   "
              f"cpu {self.times[ref][1] / best[1]:5.1f}x")
