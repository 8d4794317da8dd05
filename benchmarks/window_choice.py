"""What a GPU window trains with after its check (`gpu_window.sh`'s COMPILE=auto and SDPA_BACKEND=auto), read from
the check's gpu_step.json (`benchmarks/gpu_step.py`). No torch import: the decision costs the window no start-up.

    python benchmarks/window_choice.py OUT/gpu_step.json   # prints "yes|no BACKEND|-"
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def choose(check: dict, min_saving: float = 0.03) -> tuple[bool, str | None]:
    """Compiled unless RoPE's eager step measured faster; the SDPA backend (`sdpa`) that saves the most of RoPE's
    step, if that is more than `min_saving` of the step the window trains with, else None (PyTorch's order). A
    backend's saving is its compiled step's where the check timed one and the window compiles (`triton`), else its
    eager step's (the attention kernels are the same calls in the compiled step); a backend whose agreement check
    failed (`agree.ok` false) or that failed to run is no candidate. A check without a RoPE step: compiled,
    PyTorch's order."""
    row = check.get("step", {}).get("rope")
    if not row:
        return True, None
    compiled = row.get("compiled_ms", float("inf")) < row["eager_ms"]
    step = row["compiled_ms"] if compiled else row["eager_ms"]
    saved = {name: (row["compiled_ms"] - r["compiled"]) if compiled and "compiled" in r
             else row["eager_ms"] - r["eager"]
             for name, r in check.get("sdpa", {}).items() if "eager" in r and r.get("agree", {}).get("ok", True)}
    best = max(saved, key=saved.get, default=None)
    return compiled, best if best and saved[best] > min_saving * step else None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python benchmarks/window_choice.py GPU_STEP_JSON", file=sys.stderr)
        return 2
    compile_, backend = choose(json.loads(Path(argv[0]).read_text()))
    print("yes" if compile_ else "no", backend or "-")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
