"""What PE-Lab's Triton attention kernels ask of a GPU, compiled here for its architecture without one (issue 41):
registers a thread, bytes spilled to local memory (the stack ptxas reports), shared memory and SASS instructions,
for every autotune config, with and without dropout, at the paper preset's shapes.

Triton compiles for any NVIDIA target on a CPU machine (its wheel carries ptxas and cuobjdump), so a kernel that
will not build on the card, or that spills, shows here before a GPU window is spent on it. These are counts from
the compiler, not timings: at 255 registers a thread (the most) and with spills, a program of 4-8 warps keeps one
block an SM busy at most, and every spilled value is a local-memory round trip.

    python benchmarks/triton_resources.py --json out.json          # sm_90 (H100, H200); --arch 80 for an A100
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for the card, not the interpreter

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from workbench.model import triton_attention as ta  # noqa: E402
from workbench.store import code_version  # noqa: E402
from workbench.store.run import machine_identity  # noqa: E402

# the paper preset's attention calls (grids/paper.toml tier 1): 128 positions; d_head 16; MLA's q/k 16 + 8 rotary
SHAPES = {"rope/nope": (128, 16, 16), "mla": (128, 24, 16)}
_POINTERS = {"LSE": "*fp32", "SEED": "*i64", "BITS": "*i32"}
_FLOATS = {"scale", "p"}
CONSTEXPRS = ("BM", "BL", "BDK", "BDV", "DROP")


def signature(fn, dtype: str = "bf16") -> dict:
    """Triton's signature for a kernel of this module: q/k/v/o-like pointers in `dtype`, the rest by name."""
    def kind(a: str) -> str:
        if a in CONSTEXPRS:
            return "constexpr"
        if a in _POINTERS:
            return _POINTERS[a]
        if a in _FLOATS:
            return "fp32"
        return "i32" if a[0].islower() or a in ("H", "L", "DK", "DV") else f"*{dtype}"
    return {a: kind(a) for a in fn.arg_names}


def resources(cubin: bytes) -> dict:
    """Registers, stack (spilled) bytes and SASS instructions of a cubin, from the cuobjdump Triton carries."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        raise SystemExit(f"{tool} is missing: this needs the triton wheel's NVIDIA backend (pip install triton)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([str(tool), "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
        sass = subprocess.run([str(tool), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    regs, stack = re.search(r"REG:(\d+) STACK:(\d+)", usage).groups()
    return {"registers": int(regs), "spill_bytes": int(stack),
            "sass_instructions": len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+\S", sass, re.M))}


def compile_one(kernel: str, shape: tuple[int, int, int], config, drop: bool, arch: int) -> dict:
    """One kernel ("forward" / "backward") at (positions, d_k, d_v), one autotune config, compiled for sm_`arch`."""
    fn = {"forward": ta._fwd, "backward": ta._bwd}[kernel].fn
    consts = dict(BM=config.kwargs["BM"], DROP=drop, **ta._blocks(*shape))
    t0 = time.perf_counter()
    k = triton.compile(ASTSource(fn, signature(fn), consts), target=GPUTarget("cuda", arch, 32),
                       options={"num_warps": config.num_warps})
    return {"kernel": kernel, "positions": shape[0], "d_k": shape[1], "d_v": shape[2], "BM": config.kwargs["BM"],
            "warps": config.num_warps, "dropout": drop, **resources(k.asm["cubin"]), "shared_bytes": k.metadata.shared,
            "compile_s": round(time.perf_counter() - t0, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, default=90, help="compute capability x 10: 90 = H100 / H200, 80 = A100")
    ap.add_argument("--quick", action="store_true",
                    help="RoPE's shape with dropout only (the paper's training call): 6 compiles, not 24")
    ap.add_argument("--json", help="write the table here, with its provenance")
    a = ap.parse_args()
    t0 = time.perf_counter()
    shapes, drops = ([SHAPES["rope/nope"]], (True,)) if a.quick else (SHAPES.values(), (True, False))
    rows = [compile_one(kernel, shape, cfg, drop, a.arch) for kernel in ("forward", "backward")
            for shape in shapes for cfg in ta._CONFIGS for drop in drops]
    print(f"sm_{a.arch}, triton {triton.__version__}: registers a thread (255 at most), bytes spilled, shared memory")
    print(f"{'kernel':9} {'L':>4} {'d_k':>4} {'d_v':>4} {'BM':>4} {'warps':>5} {'dropout':>7} {'regs':>5} "
          f"{'spilled':>7} {'shared':>7} {'SASS':>6}")
    for r in rows:
        print(f"{r['kernel']:9} {r['positions']:4} {r['d_k']:4} {r['d_v']:4} {r['BM']:4} {r['warps']:5} "
              f"{str(r['dropout']):>7} {r['registers']:5} {r['spill_bytes']:7} {r['shared_bytes']:7} "
              f"{r['sass_instructions']:6}")
    if a.json:
        out = {"code_version": code_version(), "machine": machine_identity(),
               "threads": torch.get_num_threads(), "wall_s": round(time.perf_counter() - t0, 1),
               "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), "triton": triton.__version__,
               "torch": torch.__version__, "arch": f"sm_{a.arch}", "rows": rows}
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
