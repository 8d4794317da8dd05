"""What the compiled training step moves and computes, kernel by kernel, read from inductor's own graphs (issue 41).

No timing: torch.compile's scheduler knows, for every kernel it emits, the bytes it reads and writes (its
`get_read_write_buffers_sizes`: each buffer counted once, the best case a fused kernel can reach) and, for the
matmuls and attention it hands to libraries, their FLOPs (`estimate_flops`, torch's flop counter). This script
compiles one model of grids/paper.toml's tier 1 (`gpu_step.tier1_config`) under the step's bf16 autocast, runs one
training step so that both graphs (forward, and the backward AOTAutograd partitions off it) are built, and sums per
graph and per kernel kind:

    floor(card) = sum over kernels of max(bytes / bandwidth, FLOPs / bf16 peak)

the roofline time the compiled step cannot beat on that card (launch gaps, the optimizer and the loss outside the
graph not counted), beside the step last measured there (benchmarks/measured/step_ms.json, which may be of
older code than the graph counted). Cards: the H100 SXM (HBM3, 3.35 TB/s) and H200 (4.8 TB/s), both 989 dense
bf16 TFLOP/s (NVIDIA's data sheets).

On a CPU the graphs are inductor's C++ ones: the same AOTAutograd partition (which activations the forward saves
for the backward, the bulk of the traffic) and mostly the same fusion rules as the Triton kernels a GPU gets, but
not identical (SDPA lowers to the CPU flash kernel; its FLOPs are counted from the formula when the counter has
none). One CPU-only lowering rule that would change the count is lifted: a cat feeding pointwise users is fused
into them, as on a GPU, not written out first (`_gpu_cat_lowering`). So the CPU figure is an estimate of the GPU
graph's traffic, and is labelled as such in the JSON. Where the CPU cannot keep SDPA one kernel (MLA: q / k wider
than v) the graph holds the T x T scores and is flagged (`attention_decomposed`); `--pad-values` pads v to q's
width inside SDPA instead (an upper estimate).

    python benchmarks/step_traffic.py --preset paper --scheme rope --json OUT.json   # CPU: about 1-2 minutes
    python benchmarks/step_traffic.py --preset paper --scheme mla --pad-values        # about 70 s
    python benchmarks/step_traffic.py --preset smoke --scheme rope                    # seconds
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import torch  # noqa: E402

from gpu_step import batches, build, tier1_config  # noqa: E402

from workbench.model import attention  # noqa: E402
from workbench.store import code_version  # noqa: E402
from workbench.store.run import machine_identity  # noqa: E402
from workbench.train.loop import train_step, zero_sums  # noqa: E402

CARDS = {"H100 SXM": {"bytes_per_s": 3.35e12, "flops_per_s": 989e12},
         "H200": {"bytes_per_s": 4.8e12, "flops_per_s": 989e12}}
MEASURED = REPO / "benchmarks" / "measured" / "step_ms.json"  # one card's compiled steps (window_back.py folds them)


def measured_step(scheme: str) -> tuple[float | None, str | None]:
    """(the compiled step last measured on a GPU for this config scheme, the card of CARDS it was measured on); None
    for a figure window_back.py filled from another card's (step_ms.json's "filled")."""
    data = json.loads(MEASURED.read_text()) if MEASURED.exists() else {}
    card = next((c for c in CARDS if c.split()[0] in data.get("device", "")), None)
    return (None if scheme in data.get("filled", {}) else data.get("step_ms", {}).get(scheme)), card


def _kind(node) -> str:
    """A scheduler node's kind: matmul (mm, addmm, bmm, ...), attention (SDPA's kernels), other library calls by
    name, or "generated" (inductor's own fused pointwise / reduction kernels)."""
    if not node.is_extern():
        return "generated"
    ir = node.node
    name = str(getattr(ir, "op_overload", None) or getattr(ir, "python_kernel_name", None) or type(ir).__name__)
    if "scaled_dot_product" in name or "attention" in name:
        return "attention"
    if {"mm", "addmm", "bmm", "baddbmm"} & set(name.split(".")):  # extern_kernels.mm, aten.addmm.out, ...
        return "matmul"
    return "extern: " + name.split(".")[-2 if name.endswith(".default") else -1][:40]


def _origin_ops(node):
    """The fx nodes a kernel was made from (each part's `origins`)."""
    for n in node.get_nodes():
        yield from getattr(n.node, "origins", ()) or ()


def _op_name(o) -> str:
    name = str(getattr(o, "target", o))
    return name.split(".")[-2 if name.endswith(".default") else -1]


def _origins(node) -> str:
    """The aten ops a kernel was fused from, most frequent first (a generated kernel's recipe)."""
    return ", ".join(k for k, _ in Counter(_op_name(o) for o in _origin_ops(node)).most_common(4))


def _module(node) -> str:
    """The innermost module a kernel was fused from, the most frequent among its ops' `nn_module_stack` (class
    name and the path's last part, e.g. "LayerNorm ln1"); "-" when the graph kept none."""
    counts: Counter = Counter()
    for o in _origin_ops(node):
        meta = getattr(o, "meta", {}) or {}
        stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack")
        if stack:
            path, cls = list(stack.values())[-1]
            cls = getattr(cls, "__name__", str(cls)).split(".")[-1].strip("'>")
            counts[f"{cls} {str(path).split('.')[-1]}"] += 1
    return counts.most_common(1)[0][0] if counts else "-"


def _attention_flops(node) -> int:
    """SDPA's FLOPs from its shapes when torch's counter has no formula for the kernel (the CPU flash kernel):
    forward 4 * B * H * L * S * D (QK^T and PV); its backward kernel 2.5x that (dQ, dK, dV and the recomputed
    scores). Shapes from the kernel's first (query) and second (key) inputs."""
    try:
        q, k = (inp.get_size() for inp in node.node.inputs[:2])
        b, h, length, d = (int(v) for v in q)
        s = int(k[-2])
    except (AttributeError, TypeError, ValueError):
        return 0
    fwd = 4 * b * h * length * s * d
    return int(fwd * 2.5) if "backward" in str(getattr(node.node, "op_overload", "")) else fwd


def _bytes(node) -> int:
    """Bytes a kernel reads and writes, each buffer once (a library call: `_extern_bytes`). Inductor's own count
    (`get_read_write_buffers_sizes`) takes every buffer a fused kernel reads as read whole, so a layer's slice of the paper arch's fused key/value
    projection counts as all six layers'. For a fused kernel this takes, per buffer, the most any of its parts
    accesses (each part's count is bounded by its own iteration range), leaving out buffers only its parts use."""
    if node.is_extern():
        return _extern_bytes(node)
    parts = getattr(node, "snodes", None)
    if not parts:
        return int(node.get_read_write_buffers_sizes())
    inside = {p.get_name() for p in parts}
    per_buffer: dict[str, int] = {}
    for part in parts:
        for buf, n in part.get_read_write_buffer_accesses(include_reads=True, include_writes=True).items():
            users = node.scheduler.name_to_buf[buf].users if buf in node.scheduler.name_to_buf else []
            if users and all(getattr(u.node, "get_name", lambda: None)() in inside for u in users) \
                    and buf in {o.get_name() for p in parts for o in p.get_outputs()}:
                continue  # written and read inside this kernel only: never leaves it
            per_buffer[buf] = max(per_buffer.get(buf, 0), n)
    return sum(per_buffer.values())


def _extern_bytes(node) -> int:
    """A library call's bytes: its inputs as the views it is given (inductor's count takes a view's whole buffer,
    e.g. all six layers' keys and values for one layer's SDPA), and what it writes."""
    from torch._inductor.utils import get_dtype_size

    reads = 0
    for inp in getattr(node.node, "inputs", []) or []:
        try:
            reads += math.prod(int(v) for v in inp.get_size()) * get_dtype_size(inp.get_dtype())
        except (AttributeError, TypeError, NotImplementedError):
            continue
    return reads + int(node.get_write_buffer_sizes())


def _silent(record) -> bool:
    return False


def _matmul_flops(node) -> int:
    """2 * M * K * N (times the batch for bmm) from a library matmul's last two inputs' shapes (addmm's first input
    is its bias)."""
    try:
        a, b = ([int(v) for v in inp.get_size()] for inp in node.node.inputs[-2:])
    except (AttributeError, TypeError, ValueError):
        return 0
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


_CPU_CAT = "    if cpu_device:\n        return TensorBox(ir.ConcatKernel.create(inputs, dim))\n"


def _gpu_cat_lowering():
    """Inductor's `cat` lowering without its CPU shortcut: on a CPU every cat becomes a ConcatKernel (its inputs
    written into slices of a buffer that the next kernel reads again); on a GPU a cat whose users are pointwise is
    lowered as a pointwise cat and fused into them (torch/_inductor/lowering.py `cat`). Counting a GPU's graph on a
    CPU needs the GPU's choice: MLA's [content ; rotary] q and k are such cats (5.6 GB a paper step). Built from
    the installed torch's own source with that one branch removed; fails loudly if the branch is not there."""
    import inspect

    import torch._inductor.lowering as lowering

    src = inspect.getsource(lowering.cat.__wrapped__)
    if src.count(_CPU_CAT) != 1:
        raise SystemExit(f"torch {torch.__version__}: inductor's cat lowering has no CPU shortcut to lift as "
                         "step_traffic expects; update `_gpu_cat_lowering` for this torch")
    namespace = dict(vars(lowering))
    exec(compile(src.replace(_CPU_CAT, ""), lowering.__file__, "exec"), namespace)  # registers it in `lowerings`
    return namespace["cat"]


class Recorder:
    """Patches inductor's per-graph byte count (`GraphLowering.count_bytes`, which compile_fx calls for each graph
    when its `inductor_metrics` log is on) to record one row per kernel of every graph compiled meanwhile; with
    `gpu_cat`, cats are lowered as on a GPU (`_gpu_cat_lowering`)."""

    def __init__(self, gpu_cat: bool = False):
        self.rows: list[dict] = []
        self.gpu_cat = gpu_cat

    def __enter__(self):
        import logging

        from torch._functorch import config as aot_config
        import torch._inductor.lowering as lowering
        from torch._inductor import config
        from torch._inductor.graph import GraphLowering

        self._saved = (GraphLowering.count_bytes, config.fx_graph_cache, aot_config.enable_autograd_cache)
        cat = lowering.lowerings[torch.ops.aten.cat.default]
        self._cat = {op: fn for op, fn in lowering.lowerings.items() if fn is cat}
        if self.gpu_cat:
            lowering.lowerings.update(dict.fromkeys(self._cat, _gpu_cat_lowering()))
        recorder = self

        def count_bytes(graph):
            which = "backward" if graph.is_backward else ("inference" if graph.is_inference else "forward")
            for node in graph.scheduler.nodes:
                kind = _kind(node)
                flops = (node.estimate_flops() or 0) if node.is_extern() else 0
                if not flops and kind in ("attention", "matmul"):
                    flops = _attention_flops(node) if kind == "attention" else _matmul_flops(node)
                recorder.rows.append({"graph": which, "kind": kind, "bytes": _bytes(node),
                                      "flops": int(flops), "ops": _origins(node),
                                      "module": _module(node)})
            return 0, [], []

        GraphLowering.count_bytes = count_bytes
        config.fx_graph_cache = False  # a cache hit skips the scheduler: every graph must be built here
        aot_config.enable_autograd_cache = False
        torch._logging.set_logs(inductor_metrics=True)
        self._log = logging.getLogger("torch._inductor.compile_fx.__inductor_metrics")
        self._log.addFilter(_silent)  # the patched count reports nothing worth printing
        return self

    def __exit__(self, *exc):
        from torch._functorch import config as aot_config
        import torch._inductor.lowering as lowering
        from torch._inductor import config
        from torch._inductor.graph import GraphLowering

        GraphLowering.count_bytes, config.fx_graph_cache, aot_config.enable_autograd_cache = self._saved
        lowering.lowerings.update(self._cat)
        torch._logging.set_logs()
        self._log.removeFilter(_silent)


def _roofline_ms(rows: list[dict], card: dict) -> tuple[float, float]:
    """(floor, its memory-bound part) in ms: sum over kernels of max(bytes / bandwidth, FLOPs / peak)."""
    mem = [r["bytes"] / card["bytes_per_s"] for r in rows]
    comp = [r["flops"] / card["flops_per_s"] for r in rows]
    return 1e3 * sum(map(max, mem, comp)), 1e3 * sum(m for m, c in zip(mem, comp) if m >= c)


def _grouped(rows: list[dict], key) -> list[tuple[tuple, list[dict]]]:
    """(key, its rows) per value of `key(row)`, the most bytes first."""
    groups: dict = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return sorted(groups.items(), key=lambda kv: -sum(r["bytes"] for r in kv[1]))


def _totals(rows: list[dict]) -> dict:
    return {"kernels": len(rows), "bytes": sum(r["bytes"] for r in rows), "flops": sum(r["flops"] for r in rows)}


def summarise(rows: list[dict], cards: dict = CARDS) -> dict:
    """Per graph and kind: kernels, bytes, FLOPs; per card the roofline floor (ms) of each and in all; per module
    (class) and kind the same totals."""
    out: dict = {"by_graph_kind": [], "floor_ms": {}, "bound_by": {}}
    for (graph, kind), g in _grouped(rows, lambda r: (r["graph"], r["kind"])):
        out["by_graph_kind"].append({"graph": graph, "kind": kind, **_totals(g),
                                     **{f"floor_ms {c}": _roofline_ms(g, card)[0] for c, card in cards.items()}})
    for c, card in cards.items():
        floor, mem = _roofline_ms(rows, card)
        out["floor_ms"][c] = floor
        out["bound_by"][c] = {"memory_ms": mem, "compute_ms": floor - mem}
    out["by_module"] = [{"module": m, "kind": k, **_totals(g)}
                        for (m, k), g in _grouped(rows, lambda r: (r["module"].split(" ")[0], r["kind"]))]
    return out | _totals(rows)


def _padded_sdpa(q, k, v, mask, p):
    """SDPA with v zero-padded to q's width and the output cut back: the same values, in a graph that keeps SDPA
    one kernel on CPU, whose flash kernel needs q, k and v of one width (MLA's q / k are d_head + d_rope wide, its v
    d_head). Its count then overstates the attention kernels' bytes by v's and the output's padding."""
    import torch.nn.functional as F

    width = v.shape[-1]
    if q.shape[-1] == width:
        return F.scaled_dot_product_attention(q, k, v, mask, p)
    v = F.pad(v, (0, q.shape[-1] - width))
    return F.scaled_dot_product_attention(q, k, v, mask, p)[..., :width]


def one_step(cfg: dict, dev: torch.device, pad_values: bool = False) -> None:
    """One compiled training step of `cfg` as `train` runs it on a GPU (`gpu_step.build`, bf16 autocast): the
    paper arch's keys and values of every layer in one matmul (`PEClassifier.fused_kv`, which CUDA turns on by
    itself); SDPA wherever the model may use it (on CPU the model keeps short keys on its explicit path,
    `SDPA_CPU_MIN_WORK`; CUDA never does). torch.compile traces at the first step, after these are set."""
    attention.SDPA_CPU_MIN_WORK = 0
    (xb, yb), = batches(cfg, 1, dev)
    model, fwd, opt = build(cfg, dev, True, xb, True)
    model.fused_kv = True
    if dev.type == "cpu" and pad_values:
        for m in model.modules():
            if isinstance(m, attention.Attention):
                m.sdpa = _padded_sdpa
    sums = zero_sums(dev)
    tcfg = cfg["train"]
    train_step(fwd, opt, list(model.parameters()), xb, yb, None, sums, ignore=tcfg.get("ignore_label"), amp=True,
               grad_clip=tcfg.get("grad_clip"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--scheme", default="rope", help="rope, nope or mla (grids/paper.toml tier 1)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="override, e.g. model.dropout=0")
    ap.add_argument("--pad-values", action="store_true",
                    help="on CPU, pad v to q's width inside SDPA (MLA), so that it stays one kernel to count")
    ap.add_argument("--activation-budget", type=float, default=None, metavar="B",
                    help="AOTAutograd's activation memory budget (torch._functorch.config.activation_memory_budget,"
                         " 0-1): below 1 the partitioner saves fewer activations and recomputes them in the "
                         "backward; default torch's (1: the min-cut partition, what training compiles)")
    ap.add_argument("--top", type=int, default=12, help="the largest kernels by bytes to list")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    dev = torch.device(a.device)
    cfg = tier1_config(a.scheme, a.preset, a.sets)
    sites = cfg["model"].get("dropout_sites", [])
    left_out = []
    if dev.type != "cuda" and cfg["model"]["dropout"] > 0 and "attn_weights" in sites:
        # a GPU applies attention dropout inside its fused SDPA kernel (no traffic of its own); the CPU flash kernel
        # has no dropout, so SDPA would decompose into the T x T scores, a graph no GPU runs
        cfg["model"]["dropout_sites"] = [x for x in sites if x != "attn_weights"]
        left_out = ["attn_weights dropout (inside the GPU's attention kernel; on CPU it would decompose SDPA)"]
    from torch._functorch import config as aot_config

    if a.activation_budget is not None:
        aot_config.activation_memory_budget = a.activation_budget
    t0 = time.perf_counter()
    with Recorder(gpu_cat=dev.type != "cuda") as rec:
        one_step(cfg, dev, pad_values=a.pad_values)
    wall = time.perf_counter() - t0
    rows = [r for r in rec.rows if r["graph"] != "inference"]
    if not rows:
        raise SystemExit("no graph was compiled: nothing to count (is torch.compile available here?)")
    decomposed = not any(r["kind"] == "attention" for r in rows)
    if a.pad_values:
        left_out.append("v padded to q's width inside SDPA (the attention kernels' bytes overstated by the padding)")
    if decomposed:
        # the model called SDPA, but the graph holds no attention kernel: inductor decomposed it (on CPU: q / k and
        # v of different widths, MLA's, which the CPU flash kernel cannot take), so the T x T scores sit in the
        # graph, as they do in no GPU's: this floor is not an estimate of a GPU step
        left_out.append("no fused attention kernel: SDPA decomposed into the T x T scores (not a GPU's graph)")
    s = summarise(rows)
    measured, measured_on = measured_step(cfg["model"]["scheme"])
    m = cfg["model"]
    out = {"code_version": code_version(), "machine": machine_identity(), "threads": torch.get_num_threads(),
           "wall_s": round(wall, 1), "command": "python benchmarks/step_traffic.py " + " ".join(sys.argv[1:]),
           "attention_decomposed": decomposed, "device": a.device,
           "activation_memory_budget": aot_config.activation_memory_budget,
           "graphs_of": ("this GPU's Triton graphs" if dev.type == "cuda" else
                         "inductor's CPU graphs with the GPU's cat lowering (an estimate of the GPU's: same "
                         "partition, close but not identical fusion)"),
           "torch": torch.__version__, "preset": a.preset, "scheme": a.scheme, "config_scheme": m["scheme"],
           "batch_size": cfg["train"]["batch_size"], "d_model": m["d_model"], "n_layers": m["n_layers"],
           "left_out": left_out, "cards": CARDS, "measured_step_ms": measured,
           "measured_on": measured_on if measured else None, **s,
           "top": sorted(rows, key=lambda r: -r["bytes"])[:a.top]}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    print(f"{a.scheme} at {a.preset} (batch {out['batch_size']}), {out['graphs_of']}: {s['kernels']} kernels, "
          f"{s['bytes'] / 1e9:.2f} GB moved, {s['flops'] / 1e12:.3f} TFLOP in library calls a step")
    print(f"{'graph':9} {'kind':24} {'kernels':>7} {'GB':>7} {'TFLOP':>7} " +
          " ".join(f"{'ms ' + c:>13}" for c in CARDS))
    for r in s["by_graph_kind"]:
        print(f"{r['graph']:9} {r['kind'][:24]:24} {r['kernels']:7d} {r['bytes'] / 1e9:7.3f} {r['flops'] / 1e12:7.3f} "
              + " ".join(f"{r['floor_ms ' + c]:13.2f}" for c in CARDS))
    for card in CARDS:
        b = s["bound_by"][card]
        print(f"floor on {card}: {s['floor_ms'][card]:.2f} ms ({b['memory_ms']:.2f} memory-bound, "
              f"{b['compute_ms']:.2f} compute-bound)"
              + (f"; last measured there (step_ms.json, maybe older code): {measured:.2f} ms"
                 if measured and card == measured_on else ""))
    print("by module (forward and backward):")
    for r in s["by_module"]:
        print(f"  {r['module'][:20]:20} {r['kind'][:12]:12} {r['kernels']:5d} kernels {r['bytes'] / 1e9:7.3f} GB "
              f"({r['bytes'] / max(s['bytes'], 1):.0%})")
    if left_out:
        print("left out: " + "; ".join(left_out))
    print("largest kernels by bytes:")
    for r in out["top"]:
        print(f"  {r['graph']:8} {r['kind'][:20]:20} {r['bytes'] / 1e6:8.1f} MB {r['flops'] / 1e9:8.1f} GFLOP  "
              f"{r['module'][:28]:28} {r['ops']}")


if __name__ == "__main__":
    main()
