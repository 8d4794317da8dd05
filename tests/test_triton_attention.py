"""PE-Lab's Triton attention kernel (`workbench.model.triton_attention`, the `triton` SDPA backend), run on CPU in
Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1): the same values and gradients as the formula,
dropout's mask drawn once and used by both passes, the calls it cannot run left to SDPA, and whole models (RoPE,
MLA, eager and compiled) equal with and without it."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from workbench.model import ModelConfig, PEClassifier  # noqa: E402
from workbench.model.attention import Attention  # noqa: E402
from workbench.model.triton_attention import _CONFIGS, _blocks, attention, runs_here  # noqa: E402
from workbench.train.loop import sdpa_backend_context  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="these tests run the kernels in Triton's interpreter on CPU tensors (tests/"
                                       "conftest.py sets it where there is no GPU); on a GPU the `gpu` test of "
                                       "tests/test_gpu_path.py checks them")


def formula(q, k, v, keep=None, p=0.0):
    """softmax(q k^T / sqrt(d_k)) v, the weights masked by `keep` and scaled by 1 / (1 - p)."""
    w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1)
    return (w if keep is None else w * keep / (1 - p)) @ v


def qkv(B, H, L, dk, dv, seed=0):
    """Inputs as the model hands them to SDPA: [batch, head, pos, d] views of [batch, pos, head, d] tensors."""
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, L, H, dk, generator=g).transpose(1, 2).requires_grad_() for _ in range(2))
    return q, k, torch.randn(B, L, H, dv, generator=g).transpose(1, 2).requires_grad_()


@pytest.mark.parametrize("B,H,L,dk,dv", [(2, 3, 16, 16, 16), (2, 2, 20, 24, 16), (1, 2, 33, 8, 32)])
def test_values_and_gradients_are_the_formulas(B, H, L, dk, dv):
    """Lengths that are not a power of two (masked key columns, padded query rows), MLA-like query/key widths
    wider than the values, and head sizes under 16 (zero-padded): forward and all three gradients within fp32
    rounding of autograd through the formula, and of SDPA."""
    q, k, v = qkv(B, H, L, dk, dv)
    z = attention(q, k, v)
    assert z.shape == (B, H, L, dv)
    torch.testing.assert_close(z, F.scaled_dot_product_attention(q, k, v), atol=2e-6, rtol=1e-5)
    g = torch.randn_like(z)
    got = torch.autograd.grad(z, (q, k, v), g)
    want = torch.autograd.grad(formula(q, k, v), (q, k, v), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("L", [32, 100])  # a row's keys in one int32 word of bits, and in four (the paper's 128)
def test_dropout_draws_one_mask_for_both_passes_from_torchs_generator(L):
    """p = 0.3: read the dropped weights through one-hot values (v = I): about 30 % are zero, independently across
    keys, rows, heads and sequences, and the rest are the softmax's / 0.7; the output and gradients for other
    values are the formula's with that very mask (so the backward reads the forward's draws back); torch's seed
    fixes the mask, another seed moves it."""
    B, H, p = 4, 2, 0.3
    q, k, _ = qkv(B, H, L, 16, 16, seed=1)
    q, k = q.detach(), k.detach()
    eye = torch.eye(L).expand(B, H, L, L)
    torch.manual_seed(5)
    dropped = attention(q, k, eye, None, p)
    keep = dropped != 0
    assert abs((~keep).float().mean().item() - p) < 0.02
    torch.testing.assert_close(dropped, formula(q, k, eye) * keep / (1 - p), atol=1e-6, rtol=1e-5)
    torch.manual_seed(5)
    assert torch.equal(attention(q, k, eye, None, p), dropped)
    torch.manual_seed(6)
    assert not torch.equal(attention(q, k, eye, None, p) != 0, keep)
    # one philox call draws four weights (a row's four quarters of keys): each pair of quarters, heads, rows and
    # sequences agrees as often as independent draws do, p^2 + (1 - p)^2, not always
    independent = p ** 2 + (1 - p) ** 2
    C = _blocks(L, 16, 16)["BL"] // 4  # a quarter of the key block (32 for 100 keys: the last has 4; 16 for 32)
    for t in [t for t in (1, 2, 3) if t * C < L]:  # the quarters holding keys (32 keys: 2 of the 64-key block's)
        n = min(C, L - t * C)
        a, b = keep[..., :n], keep[..., t * C:t * C + n]
        assert abs((a == b).float().mean().item() - independent) < 0.05
    for a, b in ((keep[:, 0], keep[:, 1]), (keep[..., ::2, :], keep[..., 1::2, :]), (keep[0], keep[1])):
        assert abs((a == b).float().mean().item() - independent) < 0.05

    q, k = q.clone().requires_grad_(), k.clone().requires_grad_()
    v = torch.randn(B, H, L, 16, requires_grad=True)
    torch.manual_seed(5)
    z = attention(q, k, v, None, p)
    g = torch.randn_like(z)
    got = torch.autograd.grad(z, (q, k, v), g)
    torch.testing.assert_close(z, formula(q, k, v, keep, p), atol=2e-6, rtol=1e-5)
    for a, b in zip(got, torch.autograd.grad(formula(q, k, v, keep, p), (q, k, v), g)):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-5)


def test_calls_it_cannot_run_go_to_sdpa_unchanged(monkeypatch):
    """A mask, more than 128 keys, or queries and keys of other lengths: SDPA's own result, bit for bit; and on a
    CPU outside the interpreter nothing runs the kernel."""
    q, k, v = (t.detach() for t in qkv(1, 2, 16, 16, 16))
    mask = torch.zeros(1, 1, 16, 16)
    mask[..., 3] = -1e9
    assert torch.equal(attention(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    long = [t.detach() for t in qkv(1, 1, 130, 16, 16)]
    assert not runs_here(*long, None)
    assert torch.equal(attention(*long), F.scaled_dot_product_attention(*long))
    assert not runs_here(q[:, :, :8], k, v, None)
    assert runs_here(q, k, v, None)
    # a view whose elements span 2^31 or more (the paper arch's keys inside all six layers' at a batch of 6,000):
    # the kernels' int32 indices would wrap, so SDPA takes it
    B, L, width = 6000, 128, 12 * 256
    wide = SimpleNamespace(shape=(B, 16, L, 16), stride=lambda: (L * width, 16, width, 1), is_cuda=False)
    assert (B - 1) * L * width >= 2 ** 31 and not runs_here(q, wide, v, None)
    wide.shape = (4000, 16, L, 16)  # 4,000 sequences fit
    assert runs_here(SimpleNamespace(**{**vars(wide), "stride": lambda: (L * 16 * 16, 16, 256, 1)}), wide, v, None)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not runs_here(q, k, v, None)


def _model(scheme, **kw):
    """The paper arch at d_head 16 over 24 positions (enough work that CPU takes the SDPA path), no pad mask."""
    cfg = ModelConfig(vocab_size=24, n_classes=6, arch="paper", scheme=scheme, d_model=64, n_heads=4, d_ff=48,
                      n_layers=2, max_len=24, dropout=0.0, attn_pad_mask=False, **kw)
    torch.manual_seed(0)
    return PEClassifier(cfg).train()


def _logits_and_grads(model, tokens, fwd=None):
    """(logits, parameter gradients, the kernel's forward and backward calls counted by torch.profiler)."""
    from torch.profiler import profile

    model.zero_grad()
    with profile() as prof:
        logits = (model if fwd is None else fwd)(tokens)
        logits.square().sum().backward()
    calls = {e.key: e.count for e in prof.key_averages() if e.key.startswith("pelab::triton_attention")}
    return logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None], calls


@pytest.mark.parametrize("scheme", ["rope", "mla"])
def test_a_model_trains_the_same_with_the_triton_backend(scheme):
    """`sdpa_backend_context("triton")` routes every attention layer's SDPA call to the kernel while inside
    (`Attention.sdpa` restored after): the paper arch's RoPE and MLA (queries and keys wider than values) give the
    same logits and parameter gradients as with SDPA, within fp32 rounding."""
    model = _model(scheme)
    tokens = torch.randint(1, 24, (3, 24), generator=torch.Generator().manual_seed(1))  # 3 x 4 heads a layer
    want = _logits_and_grads(model, tokens)
    before = Attention.__dict__["sdpa"]
    with sdpa_backend_context("triton"):
        assert Attention.sdpa is attention
        got = _logits_and_grads(model, tokens)
    assert Attention.__dict__["sdpa"] is before
    assert want[2] == {} and got[2] == {"pelab::triton_attention": 2, "pelab::triton_attention_backward": 2}
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    assert len(got[1]) == len(want[1])
    for a, b in zip(got[1], want[1]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_the_kernel_compiles_inside_a_compiled_model():
    """torch.compile of a model that calls the kernel (custom ops with fake shapes; how a GPU window trains):
    logits and gradients equal the eager model's with SDPA."""
    from workbench.train.loop import compiled

    model = _model("rope")
    tokens = torch.randint(1, 24, (3, 24), generator=torch.Generator().manual_seed(2))
    want = _logits_and_grads(model, tokens)
    torch._dynamo.reset()
    with sdpa_backend_context("triton"):
        fwd = compiled(model, tokens[:1], False, "default")
        _logits_and_grads(model, tokens, fwd)  # compiles (the profiler would count the tracing's calls too)
        got = _logits_and_grads(model, tokens, fwd)
    torch._dynamo.reset()
    assert got[2] == {"pelab::triton_attention": 2, "pelab::triton_attention_backward": 2}
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    for a, b in zip(got[1], want[1]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_the_gpu_check_trusts_the_kernel_only_where_it_agrees_with_sdpa(monkeypatch):
    """benchmarks/gpu_step.py's `kernel_agreement` (what a GPU window checks before it times, and may train with,
    the kernel): at the smoke preset's RoPE and MLA shapes, batch 2 (MLA's queries and keys d_rope wider), it agrees
    (the attention alone timed at the config's attention dropout, and without where that is not 0);
    a kernel off by a softmax temperature of 1.1 does not, and neither does a call the kernel cannot run."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu_step

    from workbench.model import triton_attention

    mla_dropout = ["model.dropout=0.1", "train.fused_attention=true", 'model.dropout_sites=["attn_weights"]']
    cfgs = [gpu_step.tier1_config("rope", "smoke", ["train.batch_size=2"]),
            gpu_step.tier1_config("mla", "smoke", ["train.batch_size=2", *mla_dropout])]
    got = gpu_step.kernel_agreement(cfgs, torch.device("cpu"), amp=False, op_steps=1)
    assert got["ok"] and set(got) == {"ok", "what", "rope+sinusoidal", "mla", "tuned"}
    for row, p in ((got["rope+sinusoidal"], 0.0), (got["mla"], 0.1)):  # forward + backward alone, timed
        assert row["op_dropout"] == p and row["op_ms"]["triton"] > 0 and row["op_ms"]["sdpa"] > 0
        assert ("op_ms_p0" in row) == (p > 0)  # and without dropout where the run trains with it
    assert f"BM: {_CONFIGS[0].kwargs['BM']}," in got["tuned"]["forward"]["only"]  # the interpreter's one config
    assert set(got["tuned"]) == {"forward", "backward"}
    assert got["mla"]["shape"][3] > got["mla"]["shape"][4] and got["rope+sinusoidal"]["runs_here"]
    assert max(got["mla"]["triton_err"]) < 1e-5

    def warm(q, k, v, mask=None, dropout_p=0.0):
        return attention(q * 1.1, k, v, mask, dropout_p)

    monkeypatch.setattr(triton_attention, "attention", warm)
    assert not gpu_step.kernel_agreement(cfgs[:1], torch.device("cpu"), amp=False)["ok"]
    monkeypatch.undo()
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # the kernel cannot run here: SDPA answers, and that is no pass
    assert not gpu_step.kernel_agreement(cfgs[:1], torch.device("cpu"), amp=False)["ok"]


def test_a_run_trained_with_the_kernel_records_it_and_learns_what_sdpa_learns(tmp_path, monkeypatch):
    """`train(sdpa_backend="triton")` (`--sdpa-backend triton`): the authors' settings (no pad mask) at the smoke
    preset at d_head 16 (2 heads of 32), one epoch: the kernel computes every layer's attention, run.json records the
    backend, and every metric is the SDPA run's within fp32 rounding (dropout 0: the same function)."""
    from workbench.model import triton_attention
    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    calls, kernel = [], triton_attention._attention
    monkeypatch.setattr(triton_attention, "_attention", lambda *a: calls.append(a[0].shape) or kernel(*a))

    sets = ["train.epochs=1", "task.n_examples=48", "model.d_model=32", "model.n_heads=2", "model.n_layers=1"]
    runs = {}
    for backend in (None, "triton"):
        store = RunStore(tmp_path / str(backend), data_dir=tmp_path / "data")
        cfg = resolve_config("smoke", "rope", "t1", fidelity="authors", sets=sets, store=store)
        runs[backend] = train(cfg, store, progress=False, device="cpu", threads=1, sdpa_backend=backend)
    assert runs["triton"].info["sdpa_backend"] == "triton" and runs[None].info["sdpa_backend"] is None
    # what the autotuner chose is in run.json (here the interpreter's one config), and nothing for SDPA's run
    assert set(runs["triton"].info["triton_tuned"]) == {"forward", "backward"} and runs[None].info["triton_tuned"] is None
    assert len(calls) >= 2 and {c[1:] for c in calls} == {(24, 2, 16)}  # 1 layer: the steps and the evaluation
    (a,), (b,) = runs[None].metric_rows(), runs["triton"].metric_rows()
    for key in ("train_loss", "test_loss", "test_acc"):
        assert b[key] == pytest.approx(a[key], abs=1e-4), key


def test_the_kernel_check_alone_exits_by_its_verdict(tmp_path, monkeypatch):
    """`gpu_step.py --kernel-check JSON` (what a window told SDPA_BACKEND=triton runs first): the agreement into
    JSON with the code version, exit 0 where the kernel agrees, 1 where it cannot run (so the window falls back)."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu_step

    for interpret, code in (("1", 0), ("0", 1)):
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
        out = tmp_path / f"check-{interpret}.json"
        monkeypatch.setattr(sys, "argv", ["gpu_step.py", "--device", "cpu", "--preset", "smoke", "--set",
                                          "train.batch_size=8", "--kernel-check", str(out)])
        with pytest.raises(SystemExit) as stop:
            gpu_step.main()
        got = json.loads(out.read_text())
        assert stop.value.code == code and got["ok"] is (code == 0) and got["preset"] == "smoke"
        assert got["code_version"] and set(got) >= {"rope+sinusoidal", "mla"}


def test_inputs_whose_last_dim_is_not_contiguous_are_read_right():
    """The kernels index the last dim as 0, 1, 2, ...: the custom op itself (which a compiled graph calls with the
    layouts its compiler chose) copies a layout without that first (here [batch, head, d, pos] transposed), so the
    values and gradients are still the formula's."""
    from workbench.model.triton_attention import _attention

    B, H, L, d = 2, 2, 16, 16
    q, k, v = (torch.randn(B, H, d, L).transpose(-1, -2).requires_grad_() for _ in range(3))
    assert q.stride(-1) != 1
    z = _attention(*(t.transpose(1, 2) for t in (q, k, v)), torch.zeros(1, dtype=torch.int64), 0.0)[0]
    z = z.transpose(1, 2)
    g = torch.randn_like(z)
    torch.testing.assert_close(z, formula(q, k, v), atol=2e-6, rtol=1e-5)
    for a, b in zip(torch.autograd.grad(z, (q, k, v), g), torch.autograd.grad(formula(q, k, v), (q, k, v), g)):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-5)


def test_the_kernels_build_for_the_gpu_and_spill_no_register(tmp_path):
    """The interpreter runs the kernels' Python, not the GPU compiler: compiled here for sm_90 (H100 / H200; Triton
    carries ptxas), every autotune config of both kernels builds at the paper's shape with dropout, spills nothing
    to local memory and fits the card's shared memory (benchmarks/triton_resources.py)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / "resources.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "triton_resources.py"), "--quick", "--json",
                           str(out)], env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert {(r["kernel"], r["BM"], r["warps"]) for r in rows} == {
        (kernel, c.kwargs["BM"], c.num_warps) for kernel in ("forward", "backward") for c in _CONFIGS}
    for r in rows:
        assert r["dropout"] and r["spill_bytes"] == 0 and r["registers"] <= 255, r
        assert r["shared_bytes"] <= 227 * 1024 and r["sass_instructions"] > 100, r


def test_tuned_reports_each_keys_choice_and_every_configs_timings(monkeypatch):
    """On a GPU the autotuner times every config once per key and keeps only the latest timings: `tuned` still
    gives each key's choice with its own timings (what the window's measurement brings back to prune the configs)."""
    from workbench.model import triton_attention as ta

    monkeypatch.setattr(ta, "_TIMINGS", {"forward": {}, "backward": {}})
    fake = SimpleNamespace(configs=["BM 32", "BM 64"], cache={}, configs_timings=None)
    monkeypatch.setattr(ta, "_fwd", fake)
    for key, timings in (((128, 16, 16), {"BM 32": [0.2, 0.19, 0.21], "BM 64": [0.3, 0.29, 0.31]}),
                         ((128, 24, 16), {"BM 32": 0.5, "BM 64": 0.4})):
        fake.cache[key] = min(timings, key=lambda c: timings[c] if isinstance(timings[c], float) else timings[c][0])
        fake.configs_timings = timings
        ta._note_timings("forward", fake)
        ta._note_timings("forward", fake)  # a call that tuned nothing new changes nothing
    got = ta.tuned()["forward"]
    assert got["(128, 16, 16)"] == {"chosen": "BM 32", "ms": {"BM 32": [0.2, 0.19, 0.21], "BM 64": [0.3, 0.29, 0.31]}}
    assert got["(128, 24, 16)"] == {"chosen": "BM 64", "ms": {"BM 32": [0.5], "BM 64": [0.4]}}
