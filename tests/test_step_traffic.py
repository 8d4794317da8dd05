"""benchmarks/step_traffic.py: the bytes and FLOPs of the compiled step's kernels, read from inductor's graphs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import step_traffic  # noqa: E402


def _rows(fn, *args):
    torch._dynamo.reset()
    with step_traffic.Recorder() as rec:
        torch.compile(fn)(*args)
    torch._dynamo.reset()
    return rec.rows


def test_kernels_count_what_they_touch_not_the_whole_buffer_a_slice_is_of():
    """A pointwise kernel moves its input and output once (2 x 256 x 256 x 4 bytes). A fused kernel (pointwise +
    reduction) over a 64-column slice of a 256-column tensor reads the slice, not the tensor: inductor's own count
    would take all of it (328,704 bytes here). A matmul given a slice reads the slice, and its FLOPs are 2 M K N."""
    (row,) = _rows(lambda x: x * 2 + 1, torch.randn(256, 256))
    assert row["kind"] == "generated" and row["bytes"] == 2 * 256 * 256 * 4

    def fused(x):
        s = x[:, :64]
        return s * 2 + 1, (s * 3).sum(1)

    (row,) = _rows(fused, torch.randn(256, 256))
    assert row["bytes"] == 256 * 64 * 4 * 2 + 256 * 4  # slice in, slice out, the row sums out

    (row,) = _rows(lambda x, w: x[:, :64] @ w, torch.randn(256, 256), torch.randn(64, 32))
    assert row["kind"] == "matmul" and row["flops"] == 2 * 256 * 64 * 32
    assert row["bytes"] == (256 * 64 + 64 * 32 + 256 * 32) * 4


def test_the_floor_is_each_kernels_roofline_summed():
    """floor = sum of max(bytes / bandwidth, FLOPs / peak) per kernel: a memory-bound and a compute-bound kernel
    each add their own bound, per graph and kind and in all."""
    cards = {"card": {"bytes_per_s": 1e12, "flops_per_s": 1e15}}
    rows = [{"graph": "forward", "kind": "generated", "bytes": 10**9, "flops": 0, "module": "LayerNorm ln1"},
            {"graph": "backward", "kind": "matmul", "bytes": 10**6, "flops": 10**13, "module": "Linear fc"}]
    s = step_traffic.summarise(rows, cards)
    assert s["floor_ms"]["card"] == pytest.approx(1.0 + 10.0)
    assert s["bound_by"]["card"] == pytest.approx({"memory_ms": 1.0, "compute_ms": 10.0})
    assert [(r["graph"], r["kind"]) for r in s["by_graph_kind"]] == [("forward", "generated"), ("backward", "matmul")]
    assert s["bytes"] == 10**9 + 10**6 and [r["module"] for r in s["by_module"]] == ["LayerNorm", "Linear"]


@pytest.mark.slow
def test_the_script_counts_a_compiled_training_step_with_its_provenance(tmp_path):
    """The smoke preset's RoPE step, compiled as on a GPU (bf16 autocast, fused keys / values, SDPA): both
    graphs, a fused attention kernel in each, the totals the table's rows add up to, provenance."""
    out = tmp_path / "traffic.json"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "benchmarks/step_traffic.py", "--preset", "smoke", "--scheme", "rope",
                        "--set", "model.n_layers=1", "--json", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["attention_decomposed"] is False and d["left_out"] == []
    kinds = {(r["graph"], r["kind"]) for r in d["by_graph_kind"]}
    assert {("forward", "attention"), ("backward", "attention"), ("forward", "matmul"),
            ("backward", "generated")} <= kinds
    assert d["bytes"] == sum(r["bytes"] for r in d["by_graph_kind"]) > 0
    for card, c in d["cards"].items():
        assert d["bytes"] / c["bytes_per_s"] * 1e3 <= d["floor_ms"][card] + 1e-9
    assert d["code_version"] and d["machine"]["cpu"] and d["wall_s"] > 0 and d["threads"] == 1
    assert d["activation_memory_budget"] == 1.0  # torch's default partition, what training compiles
    assert "floor on H100 SXM" in p.stdout


def test_a_cat_is_counted_as_a_gpu_lowers_it():
    """On a CPU inductor writes every cat's inputs into a buffer the next kernel reads again (here 4 kernels,
    2 x 64 KiB into the buffer, 128 KiB read and 128 KiB written by the sine); a GPU fuses a cat feeding pointwise
    users into them: one kernel reading the two inputs and writing the result. `gpu_cat` counts the GPU's choice,
    and leaves inductor's own lowering in place after it."""
    a, b = torch.randn(256, 64), torch.randn(256, 64)

    def fn(a, b):
        return torch.cat((a * 2, b + 1), -1).sin()

    def rows(gpu_cat):
        torch._dynamo.reset()
        with step_traffic.Recorder(gpu_cat=gpu_cat) as rec:
            torch.compile(fn)(a, b)
        torch._dynamo.reset()
        return [r["bytes"] for r in rec.rows if r["bytes"]]

    n = 256 * 64 * 4
    assert rows(gpu_cat=True) == [4 * n]
    cpu = rows(gpu_cat=False)
    assert len(cpu) > 1 and sum(cpu) == 8 * n
