"""The fast GPU training path (issue 41), on CPU: no mask when nothing is masked and one mask per batch in the
compute dtype, the paper arch's keys / values of all layers in one matmul, the static-shape training step without
host synchronisation, the deadline. Each equals the path it replaces within 1e-6 (fp32)."""
import json
import re
from pathlib import Path

import pytest
import torch

from workbench.model import PEClassifier
from workbench.model.attention import Attention

SCHEMES = ["rope", "nope", "alibi", "mla", "relative"]


def _tokens(n=6, length=40, vocab=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(1, vocab, (n, length), generator=g)
    t[0, 30:] = 0
    t[3, 10:] = 0
    return t


def _model(tiny_cfg, scheme, arch="paper", **kw):
    # d_head 32 x 40 key positions passes the CPU gate: SDPA is taken
    model = PEClassifier(tiny_cfg(scheme=scheme, arch=arch, d_model=64, n_heads=2, max_len=40, **kw))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # non-zero biases, so a mixed-up bias shows
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return model


def _old_mask(model):
    """The path before issue 41: the full additive mask (zeros where nothing is masked) in every layer."""
    model.attn_mask = lambda tokens, dtype: model.mask(tokens, dtype)


@pytest.mark.parametrize("arch", ["paper", "encoder", "decoder"])
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("pad_mask", [True, False])
def test_no_mask_equals_the_zero_mask_path(tiny_cfg, scheme, arch, pad_mask):
    model, x = _model(tiny_cfg, scheme, arch, attn_pad_mask=pad_mask), _tokens()
    assert (model.attn_mask(x, torch.float32) is None) == (not pad_mask and arch != "decoder")
    for training in (False, True):  # eval, and train mode at dropout 0 (the training step's path)
        model.train(training)
        new = model(x)
        _old_mask(model)
        old = model(x)
        del model.attn_mask
        assert (new - old).abs().max().item() <= 1e-6


@pytest.mark.parametrize("scheme", SCHEMES)
def test_one_mask_per_forward_in_the_compute_dtype(tiny_cfg, scheme):
    """Every layer's SDPA gets the same mask object (built once per forward), in bf16 under autocast, or None
    when nothing is masked: no fp32 mask cast in each layer, and SDPA's flash kernels stay possible."""
    x = _tokens()
    for pad_mask in (True, False):
        model = _model(tiny_cfg, scheme, attn_pad_mask=pad_mask).eval()
        seen = []
        for m in model.modules():
            if isinstance(m, Attention):
                m.sdpa = lambda q, k, v, mask, p, seen=seen: (seen.append(mask), torch.nn.functional.
                                                              scaled_dot_product_attention(q, k, v, mask, p))[1]
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            model(x)
        assert len(seen) == model.cfg.n_layers
        if scheme in ("alibi", "relative"):  # the position bias joins the mask in each layer
            assert all(s is not None and s.dtype == torch.bfloat16 and s.shape[1] == model.cfg.n_heads
                       for s in seen)
        elif pad_mask:
            assert all(s is seen[0] for s in seen) and seen[0].dtype == torch.bfloat16
        else:
            assert seen == [None] * model.cfg.n_layers


@pytest.mark.parametrize("scheme", ["rope", "nope", "alibi", "relative", "t5"])
def test_paper_arch_keys_and_values_of_all_layers_in_one_matmul(tiny_cfg, scheme):
    """`fused_kv`: the same logits and gradients within 1e-6, the same hook_k / hook_v values, the same
    state_dict names (shipped checkpoints load)."""
    x = _tokens()
    model = _model(tiny_cfg, scheme, attn_pad_mask=False)
    assert model.kv_fusable
    names = list(model.state_dict())
    outs = {}
    for fused in (False, True):
        model.fused_kv = fused
        model.zero_grad()
        logits, cache = model.run_with_cache(x, names_filter=lambda n: n.endswith(("hook_k", "hook_v")))
        logits.square().sum().backward()
        outs[fused] = logits, dict(cache.items()), {n: p.grad.clone() for n, p in model.named_parameters()}
    (l0, c0, g0), (l1, c1, g1) = outs[False], outs[True]
    assert (l0 - l1).abs().max().item() <= 1e-6
    assert sorted(c0) == sorted(c1) and len(c0) == 2 * model.cfg.n_layers
    assert all((c0[k] - c1[k]).abs().max().item() <= 1e-6 for k in c0)
    assert all((g0[k] - g1[k]).abs().max().item() <= 1e-5 * max(1.0, g0[k].abs().max().item()) for k in g0)
    assert list(model.state_dict()) == names
    model.fused_kv = None  # auto: CUDA only, so CPU runs keep their bit-exact path
    calls = []
    model.memory_kv = lambda memory: calls.append(1)
    model(x)
    assert calls == []


def test_the_fused_key_value_split_backpropagates_as_one_cat_not_a_sum_of_selects(tiny_cfg):
    """`memory_kv` splits the fused projection along its last dim: the views are those of indexing a
    [..., layer, k|v, head, d_head] view (same strides, same values), and the backward graph assembles the
    projection's gradient with one `cat`. A sum of `select_backward`s (the indexing) fused on the GPU into one
    kernel loading every layer's k and v gradient for each element (1.5 ms of a 15.9-ms H100 step)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    model = _model(tiny_cfg, "rope", attn_pad_mask=False)
    cfg = model.cfg
    memory = torch.randn(2, 5, cfg.d_model)
    kvs = model.memory_kv(memory)
    flat = torch.cat([t.flatten(-2) for kv in kvs for t in kv], -1)
    view = flat.unflatten(-1, (cfg.n_layers, 2, cfg.n_heads, cfg.d_head))
    for layer, (k, v) in enumerate(kvs):
        assert torch.equal(k, view[..., layer, 0, :, :]) and torch.equal(v, view[..., layer, 1, :, :])
        assert k.stride() == v.stride() == view[..., layer, 0, :, :].stride()

    def grad(m):
        return torch.autograd.grad(sum((k * v).sum() for k, v in model.memory_kv(m)), m)

    ops = {str(n.target) for n in make_fx(grad)(memory.requires_grad_()).graph.nodes if n.op == "call_function"}
    assert "aten.cat.default" in ops and not any("select_backward" in o for o in ops), sorted(ops)


@pytest.mark.parametrize("scheme", ["rope", "mla"])
def test_under_bf16_autocast_projections_and_rotations_stay_bf16(tiny_cfg, scheme):
    """Under bf16 autocast (the GPU path) q, k, v, the rotated q / k and the attention's output are bf16: the
    biases are added in the product's dtype and the rotation is rounded back to its input's, so no fp32 copy
    (twice the bytes) is written and read again (benchmarks/step_traffic.py). An fp32 bias (or an fp32 cos / sin
    table applied without the cast back) makes them fp32, which this fails on. The values stay within bf16
    rounding of the fp32 forward."""
    x = _tokens()
    model = _model(tiny_cfg, scheme, attn_pad_mask=False)
    names = ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_attn_out")
    for fused in ((False, True) if model.kv_fusable else (False,)):
        model.fused_kv = fused
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            logits, cache = model.run_with_cache(x, names_filter=lambda n: n.endswith(names))
        assert len(cache) == len(names) * model.cfg.n_layers
        assert {k: v.dtype for k, v in cache.items() if v.dtype != torch.bfloat16} == {}
        with torch.no_grad():
            exact = model(x)
        assert (logits.float() - exact).abs().max().item() < 0.05


def test_fp32_projections_and_rotations_compute_what_they_did_bit_for_bit():
    """In fp32 (every CPU run) the bias cast and the rotation's cast back are no-ops: q = x @ W + b and
    x cos + x_perp sin, the same ops on the same values as before they were added, so shipped runs re-train
    bit-identically. In bf16 the rotation is computed in fp32 and rounded once."""
    from workbench.model.attention import add_bias, heads
    from workbench.model.pe.rope import rotate_pairs, table_dtype

    g = torch.Generator().manual_seed(0)
    x, W, b = torch.randn(3, 5, 8, generator=g), torch.randn(2, 8, 4, generator=g), torch.randn(2, 4, generator=g)
    assert torch.equal(heads(x, W, b), (x @ W.transpose(0, 1).reshape(8, 8) + b.flatten()).unflatten(-1, (2, 4)))
    y = torch.randn(4, 6, generator=g)
    assert torch.equal(add_bias(y, b.flatten()[:6]), y + b.flatten()[:6])
    q, cos, sin = torch.randn(3, 5, 2, 4, generator=g), torch.rand(5, 2, 4, generator=g), torch.rand(5, 2, 4, generator=g)
    perp = torch.stack((-q[..., 1::2], q[..., 0::2]), dim=-1).flatten(-2)
    assert torch.equal(rotate_pairs(q, cos, sin), q * cos + perp * sin)
    q[0, 0, 0, :2] = torch.tensor([-0.0, float("inf")])
    with pytest.MonkeyPatch.context() as mp:  # the compiled form (a flip times (-1, 1)): the same values
        mp.setattr(torch.compiler, "is_compiling", lambda: True)
        compiled_form = rotate_pairs(q, cos, sin)
    assert torch.equal(compiled_form.nan_to_num(), rotate_pairs(q, cos, sin).nan_to_num())
    assert table_dtype(torch.bfloat16) == table_dtype(torch.float32) == torch.float32
    qb = q.to(torch.bfloat16)
    assert rotate_pairs(qb, cos, sin).dtype == torch.bfloat16
    assert torch.equal(rotate_pairs(qb, cos, sin), rotate_pairs(qb.float(), cos, sin).to(torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert add_bias(x @ W.transpose(0, 1).reshape(8, 8), b.flatten()).dtype == torch.bfloat16


def test_kv_fusion_only_where_every_layer_projects_as_plain_attention(tiny_cfg):
    assert not _model(tiny_cfg, "mla").kv_fusable  # latent projections
    assert not _model(tiny_cfg, "coca").kv_fusable  # keys from the queries
    assert not _model(tiny_cfg, "rope", arch="encoder").kv_fusable  # keys from LN1 of each layer's stream


# ---- the training step -------------------------------------------------------------------------------------------
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from workbench.store import RunStore  # noqa: E402
from workbench.train import resolve_config, train  # noqa: E402
from workbench.train import loop  # noqa: E402
from workbench.train.loop import (compiled, counted_loss, make_optimizer, pad_batch, set_lr, train_step,  # noqa: E402
                                  trim, zero_sums)

TINY = ["train.epochs=2", "task.n_examples=400"]


@pytest.mark.parametrize("fidelity", ["pelab", "authors"])
def test_padded_batch_loss_and_gradients_equal_the_unpadded_ones(tiny_cfg, fidelity):
    """The compiled step's last batch: PAD-only rows that count for nothing give the real rows' loss and
    gradients (authors: pads attended and pooled, label 0 ignored; pelab: pads masked)."""
    authors = fidelity == "authors"
    model = _model(tiny_cfg, "rope", attn_pad_mask=not authors, readout_include_pad=authors, pad_trained=authors)
    x, y = _tokens(n=10), torch.arange(10) % 6
    ignore = 0 if authors else None
    grads, losses = [], []
    for xb, yb, valid in ((x, y, None), pad_batch(x, y, 16)):
        model.zero_grad()
        l, c, k = counted_loss(model(xb), yb, ignore, valid)
        (l / k.clamp(min=1)).backward()
        losses.append((l.item(), c.item(), k.item()))
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    xb, yb, valid = pad_batch(x, y, 16)
    assert xb.shape == (16, 40) and (xb[10:] == 0).all() and valid.tolist() == [True] * 10 + [False] * 6
    assert losses[0][1:] == losses[1][1:] and abs(losses[0][0] - losses[1][0]) <= 1e-5
    assert all((grads[0][n] - grads[1][n]).abs().max().item() <= 1e-6 for n in grads[0])


class NoHostSync(TorchDispatchMode):
    """Fails on any op that reads a tensor's value back to the host (on CUDA a synchronisation): .item(),
    bool / if on a tensor, nonzero, torch.equal, and copies between devices."""

    FORBIDDEN = ("aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero", "aten::equal",
                 "aten::_assert_async")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name in self.FORBIDDEN:
            raise AssertionError(f"host synchronisation in the training step: {name}")
        if name in ("aten::_to_copy", "aten::copy_"):
            devices = {t.device for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)}
            devices |= {torch.device(kwargs["device"])} if kwargs.get("device") is not None else set()
            if len(devices) > 1:
                raise AssertionError(f"host synchronisation in the training step: {name} across {devices}")
        return func(*args, **kwargs)


def test_the_training_step_reads_nothing_back_to_the_host(tiny_cfg):
    """The compiled path's step (padded batch, tensor lr, fused capturable AdamW, clipping, dropout, metric sums
    on the device) under a dispatch mode that fails on any host read; the mode does catch each kind of read."""
    model = _model(tiny_cfg, "rope", dropout=0.1).train()
    tcfg = {"lr": 1e-3, "betas": [0.9, 0.99], "weight_decay": 1e-5}
    opt = make_optimizer(model, tcfg, torch.device("cpu"), compile=True)
    assert torch.is_tensor(opt.param_groups[0]["lr"])
    sums = (torch.zeros(()), torch.zeros((), dtype=torch.long), torch.zeros((), dtype=torch.long))
    xb, yb, valid = pad_batch(_tokens(n=10), torch.arange(10) % 6, 16)
    before = [p.detach().clone() for p in model.parameters()]
    with NoHostSync():
        for step in range(3):
            set_lr(opt, 1e-3 * (step + 1))
            train_step(model, opt, list(model.parameters()), xb, yb, valid, sums, ignore=None, amp=False,
                       grad_clip=1.0)
    assert opt.param_groups[0]["lr"].item() == pytest.approx(3e-3)
    assert sums[2].item() == 30 and sums[0].item() > 0  # 3 steps x 10 real rows
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    t = torch.ones(3)
    for read in (lambda: t.sum().item(), lambda: bool(t.sum() > 0), lambda: t.nonzero(), lambda: trim(xb),
                 lambda: torch.equal(t, t)):
        with pytest.raises(AssertionError, match="host synchronisation"), NoHostSync():
            read()


def test_a_compiled_model_with_position_tables_compiles_once(tiny_cfg, monkeypatch):
    """`loop.compiled` fills the per-length position tables (RoPE's cos/sin, the sinusoidal input table) in one
    eager eval-mode forward before compiling: left to the first compiled call, they were filled inside its trace,
    the guards on the caches failed at the next call and the whole model compiled again. The forward draws no
    random numbers, and the compiled steps then run without a recompile. Guards and recompiles are dynamo's, so the
    graphs go to the `aot_eager` backend (forward and backward traced, no code generated): inductor's C++ kernels
    took 25 of this test's 27 CPU-s on a fresh machine (its compile cache is keyed by the venv's path)."""
    import functools

    import torch._dynamo

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    model = _model(tiny_cfg, "rope+sinusoidal", n_layers=1, dropout=0.1).train()
    opt = make_optimizer(model, {"lr": 1e-3, "betas": [0.9, 0.99], "weight_decay": 1e-5}, torch.device("cpu"),
                         compile=True)
    xb, yb = _tokens(n=8), torch.arange(8) % 6
    torch._dynamo.reset()
    rng = torch.get_rng_state()
    fwd = compiled(model, xb, amp=False)
    assert torch.equal(torch.get_rng_state(), rng) and model.training
    assert model.pos_embed._cache and all(b.attn._cache for b in model.blocks)
    sums = (torch.zeros(()), torch.zeros((), dtype=torch.long), torch.zeros((), dtype=torch.long))
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            train_step(fwd, opt, list(model.parameters()), xb, yb, None, sums, ignore=None, amp=False,
                       grad_clip=1.0)
    assert sums[2].item() == 24 and torch.isfinite(sums[0])


def test_compiled_training_agrees_with_eager_and_pads_its_last_batch(tmp_path):
    """torch.compile (inductor) on a 1-layer smoke run: every batch of one shape (the last padded), the losses
    of eager and compiled training within 1e-4 at dropout 0 over 2 epochs (inductor fuses, so not bit-equal)."""
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "nope", "t1", sets=TINY + ["model.n_layers=1", "train.batch_size=96"],
                         store=store)
    eager = train(cfg, store, progress=False, device="cpu", threads=1)
    n_train = len(store.get(eager.id).load_dataset().train_y)
    assert n_train % 96 != 0  # a partial last batch to pad
    store2 = RunStore(tmp_path / "runs2", data_dir=tmp_path / "data")
    shapes = []
    real = loop.train_step
    loop.train_step = lambda fwd, opt, params, xb, *a, **k: (shapes.append(tuple(xb.shape)),
                                                             real(fwd, opt, params, xb, *a, **k))[1]
    try:
        compiled = train(cfg, store2, progress=False, device="cpu", threads=1, compile=True)
    finally:
        loop.train_step = real
    assert compiled.info["compiled"] is True and compiled.status == "finished"
    assert len(set(shapes)) == 1 and len(shapes) == 2 * -(-n_train // 96)
    assert len(eager.metric_rows()) == len(compiled.metric_rows()) == 2  # every epoch compared, none left out
    for a, b in zip(eager.metric_rows(), compiled.metric_rows()):
        for key in ("train_loss", "test_loss", "train_loss_eval"):
            assert abs(a[key] - b[key]) <= 1e-4, (key, a[key], b[key])
        assert a["test_acc"] == b["test_acc"]


def test_a_compile_mode_reaches_torch_compile_and_run_json_and_a_wrong_one_fails_first(tmp_path, monkeypatch):
    """`compile="reduce-overhead"` (CUDA graphs; `--compile-mode` on the CLI) is the mode torch.compile gets and
    run.json's `compiled`; True is the default mode (recorded as True); an unknown mode fails before the run
    exists, in `train`, `sweep` and the CLI, naming the ones to use."""
    from typer.testing import CliRunner

    from workbench.cli import app
    from workbench.train import sweep

    seen = []
    monkeypatch.setattr(loop.torch, "compile", lambda model, mode=None: (seen.append(mode), model)[1])
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "nope", "t1", sets=TINY[1:] + ["train.epochs=1", "model.n_layers=1"], store=store)
    run = train(cfg, store, progress=False, device="cpu", threads=1, compile="reduce-overhead")
    assert seen == ["reduce-overhead"] and run.info["compiled"] == "reduce-overhead"
    run = train(cfg, store, progress=False, device="cpu", threads=1, compile=True, force=True)
    assert seen[-1] == "default" and run.info["compiled"] is True and run.status == "finished"
    store.delete(run.id)
    with pytest.raises(ValueError, match="compile mode 'graphs': use one of default, reduce-overhead"):
        train(cfg, store, progress=False, device="cpu", compile="graphs")
    assert not store.exists(run.id)
    with pytest.raises(ValueError, match="compile mode 'graphs'"):
        sweep(Path(__file__).resolve().parent.parent / "grids" / "demo.toml", RunStore(tmp_path / "never"),
              compile="graphs")
    assert not (tmp_path / "never" / "runs").exists() or not any((tmp_path / "never").rglob("run.json"))
    r = CliRunner().invoke(app, ["train", "--preset", "smoke", "--scheme", "nope", "--task", "t1", "--device", "cpu",
                                 "--compile-mode", "graphs", "--root", str(tmp_path / "cli")])
    assert r.exit_code == 2 and "use one of default, reduce-overhead" in r.output
    r = CliRunner().invoke(app, ["sweep", str(Path(__file__).resolve().parent.parent / "grids" / "demo.toml"),
                                 "--compile-mode", "graphs", "--root", str(tmp_path / "cli")])
    assert r.exit_code == 2 and "use one of default, reduce-overhead" in r.output
    assert not (tmp_path / "cli").exists()


def test_train_eval_last_evaluates_the_training_subset_after_the_last_epoch_only(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY + ["train.epochs=3"], store=store)
    assert cfg["train"]["train_eval"] == "every"
    old = {**cfg, "train": {k: v for k, v in cfg["train"].items() if k != "train_eval"}}
    assert store.run_id(old) == store.run_id(cfg)  # configs written before the field keep their ids
    assert resolve_config("paper", "rope", "t1")["train"]["train_eval"] == "last"
    last = resolve_config("smoke", "rope", "t1", sets=TINY + ["train.epochs=3", "train.train_eval=last"],
                          store=store)
    assert store.run_id(last) != store.run_id(cfg)
    every, only = (train(c, store, progress=False, device="cpu", threads=1) for c in (cfg, last))
    ra, rb = every.metric_rows(), only.metric_rows()
    assert ["train_acc_eval" in r for r in rb] == [False, False, True]
    assert rb[-1]["train_acc_eval"] == ra[-1]["train_acc_eval"] and only.final["train_acc_eval"] == \
        every.final["train_acc_eval"]
    assert [r["test_acc"] for r in ra] == [r["test_acc"] for r in rb]  # training itself is unchanged
    with pytest.raises(ValueError, match="train_eval"):
        resolve_config("smoke", "rope", "t1", sets=["train.train_eval=sometimes"])


class FakeClock:
    """A clock that moves only when a training step runs: `step_s` seconds a step."""

    def __init__(self, step_s: float):
        self.now, self.step_s = 1000.0, step_s

    def __call__(self) -> float:
        return self.now

    def stepping(self, monkeypatch):
        real = loop.train_step

        def step(*a, **k):
            self.now += self.step_s
            return real(*a, **k)

        monkeypatch.setattr(loop, "train_step", step)

    def walls(self, monkeypatch):
        """Also the runs' own wall clock (`loop`'s time.perf_counter: `wall_s` in their metrics, which a window
        splits into start-up and seconds per epoch): this clock, so that split is exact, not the machine's load."""
        import time
        import types

        shim = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
        shim.perf_counter = self
        monkeypatch.setattr(loop, "time", shim)


class StartupClock(FakeClock):
    """A FakeClock on which each training session's first step takes `startup_s` more (its compilation)."""

    def __init__(self, step_s: float, startup_s: float):
        super().__init__(step_s)
        self.startup_s, self.first = startup_s, True

    def stepping(self, monkeypatch):
        real_step, real_session = loop.train_step, loop._train_locked

        def step(*a, **k):
            self.now += self.step_s + (self.startup_s if self.first else 0.0)
            self.first = False
            return real_step(*a, **k)

        def session(*a, **k):
            self.first = True
            return real_session(*a, **k)

        monkeypatch.setattr(loop, "train_step", step)
        monkeypatch.setattr(loop, "_train_locked", session)


def test_a_deadline_leaves_a_sessions_start_up_out_of_its_next_epoch(tmp_path, monkeypatch):
    """The deadline judged the next epoch by the session's first, its start-up (a 99-s compile in the first step)
    included: a run of 5 epochs of 5 s that fits a 130-s window with room stopped after epoch 1. The first epoch
    less its first step's time beyond its second's is 5 s (run.json `epoch_estimate_s`): the run finishes, and in a
    112-s window stops after epoch 2 (epoch 3 would end at 114 s)."""
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY[1:] + ["train.epochs=5"], store=store)
    assert -(-len(store.load_task(cfg["task"]).train_y) // cfg["train"]["batch_size"]) == 5
    clock = StartupClock(1.0, 99.0)
    clock.stepping(monkeypatch)
    start = clock.now
    for must_finish in (False, True):
        run = train(cfg, store, force=True, progress=False, device="cpu", threads=1, clock=clock,
                    deadline=clock.now + 130, must_finish=must_finish)
        assert run.status == "finished" and run.info["epoch_estimate_s"] == 5.0
    assert clock.now == start + 2 * 124
    cut = train(cfg, store, force=True, progress=False, device="cpu", threads=1, clock=clock,
                deadline=clock.now + 112)
    assert cut.status == "interrupted" and cut.info["stopped_at_deadline"] == 2


def test_a_window_books_start_up_as_start_up_not_as_epochs(tmp_path, monkeypatch):
    """Each session's first step takes 99 s more (a compile), an epoch 5 s. A run resumed for its one epoch left is
    split by its session's `epoch_estimate_s` into 99 s of start-up and a 5-s epoch (it was booked as one 104-s
    epoch, so the next seed, 99 + 3 x 5 s, was estimated at 312 s and not started); and a deferred run starts only
    where its start-up and one epoch fit the time left (it started when one epoch did, and overran the deadline by
    its start-up)."""
    from workbench.train.sweep import sweep

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    grid = {"preset": "smoke", "schemes": ["rope"], "tasks": ["t1"], "seeds": [42, 43],
            "set": {"train.epochs": 3, "task.n_examples": 400, "train.batch_size": 64}}
    first = resolve_config("smoke", "rope", "t1", seed=42, sets=["train.epochs=3", "task.n_examples=400",
                                                                  "train.batch_size=64"], store=store)
    clock = StartupClock(1.0, 99.0)
    clock.stepping(monkeypatch)
    clock.walls(monkeypatch)
    train(first, store, progress=False, device="cpu", threads=1, stop_after_epochs=2)
    start, lines = clock.now, []
    out = sweep(grid, store, device="cpu", threads=1, progress=False, deadline=250, clock=clock, partial=False,
                log=lines.append)
    assert [r["outcome"] for r in out] == ["resumed", "trained"] and clock.now == start + 104 + 114

    more = grid | {"seeds": [44, 45]}  # 44 (unknown cost: started) takes 114 s; 45's 99 + 5 s do not fit 36 s
    start = clock.now
    out = sweep(more, RunStore(tmp_path / "b", data_dir=tmp_path / "data"), device="cpu", threads=1,
                progress=False, deadline=150, clock=clock, log=lines.append)
    assert [r["outcome"] for r in out] == ["trained", "deferred"] and clock.now == start + 114


def test_deadline_checkpoints_and_stops_before_an_epoch_that_would_not_fit(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY[1:] + ["train.epochs=4"], store=store)
    steps = -(-len(store.load_task(cfg["task"]).train_y) // cfg["train"]["batch_size"])
    clock = FakeClock(1.0)
    clock.stepping(monkeypatch)
    # 2.5 epochs of time: epoch 2 ends at 2 epochs, a third would end at 3 > 2.5
    run = train(cfg, store, progress=False, device="cpu", threads=1, checkpoint_every=4, clock=clock,
                deadline=clock.now + 2.5 * steps)
    assert run.status == "interrupted" and run.info["stopped_at_deadline"] == 2
    assert run.load_checkpoint()[2]["epoch"] == 2  # checkpointed at the deadline although checkpoint_every=4
    done = train(cfg, store, progress=False, device="cpu", threads=1, resume=True, clock=clock,
                 deadline=clock.now + 10 * steps)  # the next window
    assert done.status == "finished" and [r["epoch"] for r in done.metric_rows()] == [1, 2, 3, 4]
    straight = RunStore(tmp_path / "b", data_dir=tmp_path / "data")
    ref = train(cfg, straight, progress=False, device="cpu", threads=1)
    assert [r["test_acc"] for r in ref.metric_rows()] == [r["test_acc"] for r in done.metric_rows()]


def test_epoch_timer_stops_before_an_epoch_that_would_end_past_the_deadline_or_when_the_run_cannot_finish():
    """`loop.EpochTimer` on a clock read at each epoch's start, after the session's first two steps and at the
    epoch's end: the first epoch's start-up (its first step beyond its second) is left out of the next epoch's
    estimate; an epoch that would end past the deadline stops the run; with must_finish, so does the time of the
    epochs left at the fastest epoch after the first (two timed at least); the last epoch never stops it."""
    from workbench.train.loop import EpochTimer

    def run(deadline, must_finish, ends=(20, 32, 44, 56, 68)):
        times = iter([0, 10, 12, ends[0]] + [t for a, b in zip(ends, ends[1:]) for t in (a, b)])
        timer, out = EpochTimer(lambda: next(times), deadline, len(ends), 0, must_finish), []
        for epoch in range(len(ends)):
            timer.begin()
            for i in range(2 if epoch == 0 else 0):
                timer.stepped(epoch, i)
            out.append(timer.ended(epoch))
        return out

    # epoch 0: 20 s with 8 of start-up (10 - 0 beyond 12 - 10): the next is judged 12 s
    assert [r[0] for r in run(None, False)] == [12, 12, 12, 12, 12]
    assert not any(stop for _, stop, _ in run(None, True))  # no deadline: never stops
    assert [r[1:] for r in run(60, False)] == [(False, False), (False, False), (False, False), (True, False),
                                               (False, False)]  # 56 + 12 > 60 after epoch 3
    # must finish: after epoch 2 (two timed), 44 + 2 epochs x 12 > 60: it cannot finish, so it stops there
    assert [r[1:] for r in run(60, True)][:3] == [(False, False), (False, False), (True, True)]
    assert run(100, True)[-1][1:] == (False, False) and run(50, False)[-1][1:] == (False, False)  # the last epoch


def test_a_run_that_must_finish_stops_as_soon_as_it_cannot(tmp_path, monkeypatch):
    """`train(must_finish=True)` (a window whose checkpoints are lost, `sweep --no-partial`): 6 epochs in a window of
    4.4: after epoch 3 the 3 left would end at 6 > 4.4, so it stops there, not after epoch 4 as a plain deadline
    does (judged by two epochs at least, the first, which holds the compilation on a GPU, never among them); in a
    window of 6.5 it finishes. In a sweep, a run started on a short estimate (a step time 10x too fast) gives its
    time back after 3 epochs, and the planner, now knowing the epoch, does not start the next seed."""
    from workbench.train.sweep import sweep

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY[1:] + ["train.epochs=6"], store=store)
    steps = -(-len(store.load_task(cfg["task"]).train_y) // cfg["train"]["batch_size"])
    clock = FakeClock(1.0)
    clock.stepping(monkeypatch)
    start = clock.now
    run = train(cfg, store, progress=False, device="cpu", threads=1, clock=clock, deadline=start + 4.4 * steps,
                must_finish=True)
    assert run.status == "interrupted" and run.info["stopped_at_deadline"] == 3 and clock.now == start + 3 * steps
    assert "its 3 epochs left would end past the deadline (must finish)" in run.info["error"]
    plain = train(cfg, RunStore(tmp_path / "b", data_dir=tmp_path / "data"), progress=False, device="cpu",
                  threads=1, clock=clock, deadline=clock.now + 4.4 * steps)
    assert plain.info["stopped_at_deadline"] == 4
    fits = train(cfg, RunStore(tmp_path / "c", data_dir=tmp_path / "data"), progress=False, device="cpu",
                 threads=1, clock=clock, deadline=clock.now + 6.5 * steps, must_finish=True)
    assert fits.status == "finished"

    grid = {"preset": "smoke", "schemes": ["rope"], "tasks": ["t1"], "seeds": [42, 43],
            "set": {"train.epochs": 10, "task.n_examples": 400, "train.batch_size": 64}}
    clock.walls(monkeypatch)  # the runs' wall_s on this clock too: the first run's epochs split with no start-up
    lines, start = [], clock.now  # 5 steps an epoch: 50 s a run, estimated 30 + 10 x 5 x 0.1 x 1.2 = 36 s
    out = sweep(grid, RunStore(tmp_path / "d", data_dir=tmp_path / "data"), device="cpu", progress=False,
                deadline=40, clock=clock, partial=False, step_ms={"rope": 100.0}, log=lines.append)
    assert [r["outcome"] for r in out] == ["interrupted", "deferred"] and clock.now == start + 15
    assert any("stopped after epoch 3: its 7 epochs left would end past the deadline" in line for line in lines)
    unfit = [re.search(r"does not fit the 0m25s left \(about (\d+)m(\d+)s\)", line) for line in lines]
    # the epochs the first run measured (5 s), not the step time's 36 s: 10 epochs x 5 s, no start-up on this clock
    # (on the real wall clock the split varied with the machine's load, and the estimate with it)
    assert [60 * int(m[1]) + int(m[2]) for m in unfit if m] == [50]


def test_sweep_deadline_trains_what_fits_stops_at_the_deadline_and_resumes_next_window(tmp_path, monkeypatch):
    """A fake clock (1 s a training step; 5 steps an epoch, 2 epochs a run): a 25 s window trains the first run
    (unknown cost, timed: 10 s), the second (fits), leaves the third for later, then starts it since its start-up
    (none) and one epoch fit: it checkpoints and stops at the deadline. The next window resumes it. A run whose
    benchmark cost does not fit even one epoch is not started."""
    from workbench.train.sweep import sweep

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    grid = {"preset": "smoke", "schemes": ["rope"], "tasks": ["t1"], "seeds": [42, 43, 44],
            "set": {"train.epochs": 2, "task.n_examples": 400, "train.batch_size": 64}}
    cfg = resolve_config("smoke", "rope", "t1", sets=["task.n_examples=400"], store=store)
    assert -(-len(store.load_task(cfg["task"]).train_y) // 64) == 5
    clock = FakeClock(1.0)
    clock.stepping(monkeypatch)
    clock.walls(monkeypatch)  # the first run's epochs split with no start-up, so the third's start-up + epoch fit
    lines = []
    out = sweep(grid, store, device="cpu", threads=1, progress=False, deadline=25, clock=clock, log=lines.append)
    assert [r["outcome"] for r in out] == ["trained", "trained", "interrupted"]
    assert clock.now == 1000 + 25
    third = store.get(out[2]["id"])
    assert third.info["stopped_at_deadline"] == 1 and third.state()["epoch"] == 1
    assert any("does not fit the 0m05s left (about 0m10s)" in line for line in lines)
    out = sweep(grid, store, device="cpu", threads=1, progress=False, deadline=25, clock=clock, log=lines.append)
    assert [r["outcome"] for r in out] == ["finished", "finished", "resumed"]
    assert store.get(out[2]["id"]).status == "finished"

    more = grid | {"seeds": [45, 46]}  # without --partial a run of unknown cost is not started (it may not finish)
    out = sweep(more, store, device="cpu", threads=1, progress=False, deadline=16, clock=clock, log=lines.append,
                partial=False)
    assert [r["outcome"] for r in out] == ["deferred", "deferred"] and not store.exists(out[0]["id"])
    assert any("its time unknown: no --step-ms entry for 'rope'" in line for line in lines)
    # with a benchmark's 1 s a step: 30 s start-up (eager, not timed yet) + 2 x 6 s = 42 s fits 45 s; once timed
    # (10 s a run), the next three fit the 35, 25 and 15 s left, the fifth not the 5 s left
    out = sweep(more | {"seeds": [45, 46, 47, 48, 49]}, store, device="cpu", threads=1, progress=False,
                deadline=45, clock=clock, log=lines.append, partial=False, step_ms={"rope": 1000.0})
    assert [r["outcome"] for r in out] == ["trained"] * 4 + ["deferred"] and not store.exists(out[4]["id"])

    nope = grid | {"schemes": ["nope"], "seeds": [42]}  # 5 steps x 1 s x 1.2 = 6 s an epoch > 5 s
    before = clock.now
    out = sweep(nope, store, device="cpu", progress=False, deadline=5, clock=clock, step_ms={"nope": 1000.0},
                log=lines.append)
    assert [r["outcome"] for r in out] == ["deferred"] and clock.now == before
    assert "left for the next window (about 0m42s to finish, 0m05s left)" in lines[-2]  # 30 s start-up (eager)
    assert not store.exists(out[0]["id"])
    with pytest.raises(ValueError, match="one run after another"):
        sweep(grid, store, device="cpu", deadline=25, workers=2)


def test_a_dry_run_with_a_deadline_previews_the_window_from_the_estimates(tmp_path):
    """`sweep --dry-run --deadline S`: which runs the planner would start in a window of S seconds, each taking its
    estimate of the window (nothing timed: the start-up assumed before any run is timed, 30 s eager), and nothing is
    made. With 1 s a step x 5 steps x 1.2, a 2-epoch run is 30 + 12 = 42 s: two fit 90 s, the third waits."""
    from workbench.train.sweep import sweep

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    grid = {"preset": "smoke", "schemes": ["rope"], "tasks": ["t1"], "seeds": [42, 43, 44],
            "set": {"train.epochs": 2, "task.n_examples": 400, "train.batch_size": 64}}
    cfg = resolve_config("smoke", "rope", "t1", sets=["task.n_examples=400"], store=store)
    assert -(-len(store.load_task(cfg["task"]).train_y) // 64) == 5
    clock, lines = FakeClock(1.0), []
    out = sweep(grid, store, device="cpu", progress=False, deadline=90, clock=clock, dry_run=True, partial=False,
                step_ms={"rope": 1000.0}, log=lines.append)
    assert [r["outcome"] for r in out] == ["planned", "planned", "deferred"]
    assert sum("planned in the window: about 0m42s" in line for line in lines) == 2
    assert any("0m06s left after it" in line for line in lines)
    assert any("left for the next window (about 0m42s to finish, 0m06s left)" in line for line in lines)
    assert clock.now == 1000 and not any(store.exists(r["id"]) for r in out)  # the real clock did not move


def test_a_check_of_one_scheme_is_filled_from_the_stored_table_scaled(tmp_path):
    """`fill_step_ms`: the schemes a check did not time come from another table x the median ratio on those both
    time (the H200 window of 2026-11-28 timed RoPE alone, so its planner knew no NoPE or MLA step and, with
    --no-partial, trained RoPE only); as they are where none is shared. `load_step_ms` fills the first file from the
    next, refuses a malformed one; the CLI's repeated --step-ms then plans the NoPE run the first file lacks."""
    from typer.testing import CliRunner

    from workbench.cli import app
    from workbench.train.sweep import fill_step_ms, load_step_ms

    table, how = fill_step_ms({"rope": 8.0, "alibi": 9.0}, {"rope": 10.0, "alibi": 10.0, "nope": 20.0, "mla": 5.0})
    assert table == pytest.approx({"rope": 8.0, "alibi": 9.0, "nope": 17.0, "mla": 4.25})  # median ratio 0.85
    assert sorted(how) == ["mla", "nope"]
    assert how["nope"] == "20.00 ms x 0.850 (alibi, rope here against there) = 17.00 ms"
    assert fill_step_ms({"rope": 8.0}, {"nope": 20.0})[0] == {"rope": 8.0, "nope": 20.0}
    assert fill_step_ms({"rope": 8.0, "nope": 1.0}, {"nope": 20.0}) == ({"rope": 8.0, "nope": 1.0}, {})
    # the next check on the same card times NoPE: the stored RoPE (measured) is not scaled by NoPE's ratio against
    # the stored NoPE, itself an estimate filled from another card
    assert fill_step_ms({"nope": 9.0}, {"rope": 12.8, "nope": 11.6}, estimated=["nope"])[0] == {"nope": 9.0,
                                                                                               "rope": 12.8}
    check, stored = tmp_path / "check.json", tmp_path / "stored.json"
    check.write_text(json.dumps({"rope": 500.0}))
    stored.write_text(json.dumps({"device": "X", "step_ms": {"rope": 1000.0, "nope": 2000.0}}))
    got, notes = load_step_ms([check, stored])
    assert got == {"rope": 500.0, "nope": 1000.0} and notes == [f"nope: 2000.00 ms x 0.500 (rope here against "
                                                                f"there) = 1000.00 ms, from {stored}"]
    filled = tmp_path / "filled.json"  # window_back's table after another card's check: its "filled" not a ratio
    filled.write_text(json.dumps({"step_ms": {"rope": 1000.0, "nope": 2000.0}, "filled": {"rope": "..."}}))
    assert load_step_ms([check, filled])[0] == {"rope": 500.0, "nope": 2000.0}
    assert load_step_ms(check) == ({"rope": 500.0}, []) and load_step_ms(None) == (None, [])
    (tmp_path / "bad.json").write_text(json.dumps({"step_ms": ["rope", 5]}))
    with pytest.raises(ValueError, match="expected {scheme: ms per step}"):
        load_step_ms([check, tmp_path / "bad.json"])
    (tmp_path / "log.txt").write_text("not json")  # a decode error named no file
    with pytest.raises(ValueError, match=r"--step-ms .*log.txt: not a readable JSON file"):
        load_step_ms([check, tmp_path / "log.txt"])
    (tmp_path / "list.json").write_text("[1]")  # JSON, but not a table
    with pytest.raises(ValueError, match="expected {scheme: ms per step}"):
        load_step_ms(tmp_path / "list.json")

    grid = tmp_path / "g.toml"
    grid.write_text('name = "g"\npreset = "smoke"\ntasks = ["trigger-distance"]\nseeds = [42]\nschemes = ["nope"]\n')
    common = ["sweep", str(grid), "--root", str(tmp_path / "r"), "--dry-run", "--deadline", "600", "--no-partial"]
    r = CliRunner().invoke(app, common + ["--step-ms", str(check)])
    assert r.exit_code == 0 and "its time unknown: no --step-ms entry for 'nope'" in r.output
    r = CliRunner().invoke(app, common + ["--step-ms", str(check), "--step-ms", str(stored)])
    assert r.exit_code == 0, r.output
    assert "step ms filled: nope: 2000.00 ms x 0.500" in r.output and "planned in the window" in r.output


def test_sweep_tags_keep_only_the_named_variants(tmp_path):
    from workbench.train.sweep import sweep

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    grid = {"preset": "smoke", "schemes": ["alibi"], "tasks": ["t1"], "seeds": [42],
            "variants": [{"name": "rope", "scheme": "rope", "fidelity": "authors"},
                         {"name": "nope", "scheme": "nope", "fidelity": "authors"}]}
    everything = sweep(grid, store, dry_run=True, progress=False, log=lambda m: None)
    only = sweep(grid, store, dry_run=True, progress=False, log=lambda m: None, tags=["rope", "nope"])
    assert len(everything) == 3 and [r["id"] for r in only] == [r["id"] for r in everything[1:]]


# ---- CUDA only ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_training_step_does_not_synchronise(tiny_cfg):
    """On CUDA, torch's own sync detector (set_sync_debug_mode "error") over the compiled path's step, eager:
    a padded batch, the tensor lr, fused capturable AdamW, clipping, bf16 autocast, fused attention dropout."""
    dev = torch.device("cuda")
    model = _model(tiny_cfg, "rope", dropout=0.1).to(dev).train()
    from workbench.model.attention import use_fused_dropout

    use_fused_dropout(model, True)
    opt = make_optimizer(model, {"lr": 1e-3, "betas": [0.9, 0.99], "weight_decay": 1e-5}, dev, compile=True)
    sums = zero_sums(dev)
    xb, yb, valid = pad_batch(_tokens(n=10).to(dev), (torch.arange(10) % 6).to(dev), 16)
    set_lr(opt, 1e-3)
    train_step(model, opt, list(model.parameters()), xb, yb, valid, sums, ignore=None, amp=True, grad_clip=1.0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for step in range(3):
            set_lr(opt, 1e-3 * (step + 1))
            train_step(model, opt, list(model.parameters()), xb, yb, valid, sums, ignore=None, amp=True,
                       grad_clip=1.0)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert sums[2].item() == 40


@pytest.mark.gpu
def test_cuda_fused_kv_and_no_mask_agree_with_the_plain_path_in_bf16(tiny_cfg):
    model = _model(tiny_cfg, "rope", attn_pad_mask=False).cuda().eval()
    x = _tokens().cuda()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        fast = model(x).float()  # auto: fused kv and no mask on CUDA
        model.fused_kv = False
        _old_mask(model)
        plain = model(x).float()
    assert (fast - plain).abs().max().item() < 0.05


def test_window_start_up_until_timed_then_the_largest_timed_one(tmp_path):
    """A run's estimate = start-up + epochs x seconds per epoch: `startup_s` until a run of this window is timed
    (120 s compiled: a cold compile), then the largest start-up timed (a warm compile cache shows in the first)."""
    from workbench.train.sweep import EVAL_SHARE, Window, cost_key

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=["task.n_examples=400", "train.batch_size=64",
                                                      "train.epochs=3"], store=store)
    w = Window(1000, store, clock=lambda: 0.0, step_ms={"rope": 100.0}, startup_s=120.0)
    per = 5 * 0.1 * (1 + EVAL_SHARE)  # 5 steps of 100 ms, with the evaluation's share
    assert w.estimate(cfg) == pytest.approx(120 + 3 * per)
    w.start["another kind"] = 15.0
    assert w.estimate(cfg) == pytest.approx(15 + 3 * per)
    w.start[cost_key(cfg)], w.measured[cost_key(cfg)] = 2.0, 1.0
    assert w.estimate(cfg) == pytest.approx(2 + 3 * 1.0)


def test_epoch_seconds_is_the_median_step_between_epochs():
    """What the window planner learns from a shipped run (the tests below take it as given): the median of the
    differences of consecutive epochs' wall_s, start-up and compilation (the first epoch's wall) left out."""
    from workbench.train.sweep import epoch_seconds

    assert epoch_seconds([{"wall_s": w} for w in (30.0, 32.0, 35.0, 36.0)]) == 2.0  # steps 2, 3, 1
    assert epoch_seconds([{"wall_s": 7.5}]) == 7.5 and epoch_seconds([]) is None  # one epoch: its own wall
    assert epoch_seconds([{"wall_s": 4.0}, {"epoch": 2}, {"wall_s": 9.0}]) == 5.0  # rows without wall_s skipped


def test_window_learns_a_kind_from_a_shipped_seed_on_the_same_hardware_only(tmp_path):
    """A window's store starts empty (runs-paper does not outlive a lent machine), but results/paper holds the
    kinds shipped before: a seed of a kind trained on this hardware (run.json's GPU name, or CPU model) gives the
    other seeds their epoch time and start-up, in place of `step_ms` x 1.2 + 120 s (RoPE Task 1 on the H100:
    estimated 6m21s, took 4m52s). A run from other hardware, or from before run.json named the GPU, is not used."""
    from workbench.store.ship import ship_run
    from workbench.train.sweep import Window, cost_key, epoch_seconds, this_hardware

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    sets = ["task.n_examples=400", "train.batch_size=64", "train.epochs=3"]
    run = train(resolve_config("smoke", "rope", "t1", sets=sets, seed=42, store=store), store, progress=False,
                device="cpu", threads=1)
    assert run.info["gpu"] is None  # a CPU run: its hardware is the CPU model
    ship_run(run, tmp_path / "shipped", allow_dirty="a test")
    shipped = RunStore(tmp_path / "shipped", readonly=True)
    fresh = RunStore(tmp_path / "window", data_dir=tmp_path / "data")
    other = resolve_config("smoke", "rope", "t1", sets=sets, seed=43, store=fresh)
    rows = run.metric_rows()
    w = Window(1000, fresh, clock=lambda: 0.0, step_ms={"rope": 100.0}, startup_s=120.0, shipped=shipped,
               hardware=this_hardware("cpu"))
    w.learn(other)
    sec, startup = epoch_seconds(rows), max(0.0, rows[0]["wall_s"] - epoch_seconds(rows))
    assert w.measured[cost_key(other)] == sec and w.start[cost_key(other)] == pytest.approx(startup)
    assert w.estimate(other) == pytest.approx(startup + 3 * sec)
    elsewhere = Window(1000, fresh, clock=lambda: 0.0, step_ms={"rope": 100.0}, startup_s=120.0, shipped=shipped,
                       hardware="NVIDIA H200")
    elsewhere.learn(other)
    assert cost_key(other) not in elsewhere.measured


def test_window_does_not_learn_from_packed_runs(tmp_path):
    """A packed run's `wall_s` is its pack's (K runs at once), and a window trains one run at a time: neither the
    run itself nor a shipped seed trained in a pack gives its kind an epoch time (they gave the pack's)."""
    from workbench.store.ship import ship_run
    from workbench.train.packed import train_packed
    from workbench.train.sweep import Window, cost_key, this_hardware

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfgs = [resolve_config("smoke", "rope", "t1", sets=TINY, seed=s, store=store) for s in (42, 43)]
    runs = train_packed(cfgs, store, progress=False, device="cpu", threads=1)
    w = Window(1000, store, clock=lambda: 0.0)
    w.learn(cfgs[0])
    assert cost_key(cfgs[0]) not in w.measured
    ship_run(runs[1], tmp_path / "shipped", allow_dirty="a test")
    fresh = RunStore(tmp_path / "window", data_dir=tmp_path / "data")
    shipped = Window(1000, fresh, clock=lambda: 0.0, shipped=RunStore(tmp_path / "shipped", readonly=True),
                     hardware=this_hardware("cpu"))
    assert shipped.shipped_rows() == {}


def test_window_splits_a_one_epoch_run_by_the_benchmark(tmp_path):
    """A run stopped after one epoch (a compile in it) is not read as its epoch time: the benchmark's epoch where
    shorter, the rest start-up (the H100 window read MLA's 43-s first epoch as 1h47m for 150 epochs)."""
    from workbench.train.sweep import EVAL_SHARE, Window, cost_key

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=["task.n_examples=400", "train.batch_size=64",
                                                      "train.epochs=150"], store=store)
    w = Window(1000, store, clock=lambda: 0.0, step_ms={"rope": 100.0}, startup_s=120.0)
    w.timed(cfg, 43.0, 1)
    per = 5 * 0.1 * (1 + EVAL_SHARE)
    assert w.measured[cost_key(cfg)] == pytest.approx(per) and w.start[cost_key(cfg)] == pytest.approx(43 - per)
    bare = Window(1000, store, clock=lambda: 0.0)
    bare.timed(cfg, 43.0, 1)  # no benchmark: the epoch is all it knows
    assert bare.measured[cost_key(cfg)] == 43.0 and bare.start[cost_key(cfg)] == 0.0


def test_a_preview_for_other_hardware_plans_from_the_runs_shipped_from_it(tmp_path):
    """`sweep --dry-run --deadline S --hardware NAME`: the window as the planner would make it on that GPU, its
    kinds timed by the seeds shipped from it (here a run whose run.json says it trained on "FakeGPU 1"), where this
    machine's own preview knows no time for them; a name no shipped run has, or --hardware outside a preview, is
    refused naming what to change."""
    import json

    from workbench.store.manifest import write_manifest
    from workbench.store.ship import ship_run
    from workbench.train.sweep import epoch_seconds, sweep

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    sets = {"task.n_examples": 400, "train.batch_size": 64, "train.epochs": 3}
    run = train(resolve_config("smoke", "rope", "t1", sets=[f"{k}={v}" for k, v in sets.items()], seed=42,
                               store=store), store, progress=False, device="cpu", threads=1)
    ship_run(run, tmp_path / "shipped", allow_dirty="a test")
    info_path = tmp_path / "shipped" / run.id / "run.json"  # as if trained on a GPU elsewhere
    info_path.write_text(json.dumps(json.loads(info_path.read_text()) | {"device": "cuda", "gpu": "FakeGPU 1"}))
    write_manifest(tmp_path / "shipped" / run.id)
    shipped = RunStore(tmp_path / "shipped", readonly=True)
    rows = run.metric_rows()
    sec = epoch_seconds(rows)
    est = max(0.0, rows[0]["wall_s"] - sec) + 3 * sec
    grid = {"preset": "smoke", "schemes": ["rope"], "tasks": ["t1"], "seeds": [42, 43], "set": sets}
    fresh = RunStore(tmp_path / "window", data_dir=tmp_path / "data")

    lines = []
    out = sweep(grid, fresh, device="cpu", progress=False, deadline=est + 30, clock=FakeClock(0.0), dry_run=True,
                partial=False, shipped=shipped, hardware="FakeGPU 1", log=lines.append)
    assert [r["outcome"] for r in out] == ["shipped", "planned"]
    assert any(f"planned in the window: about {sweep_fmt(est)}" in line for line in lines), lines
    lines = []
    here = sweep(grid, fresh, device="cpu", progress=False, deadline=est + 30, clock=FakeClock(0.0), dry_run=True,
                 partial=False, shipped=shipped, log=lines.append)  # this CPU: no run of the kind shipped from it
    assert [r["outcome"] for r in here] == ["shipped", "deferred"] and any("time unknown" in x for x in lines)
    with pytest.raises(ValueError, match="pick one of 'FakeGPU 1'"):
        sweep(grid, fresh, device="cpu", progress=False, deadline=60, dry_run=True, shipped=shipped,
              hardware="FakeGPU 2", log=lambda m: None)
    with pytest.raises(ValueError, match="use it with --dry-run and --deadline"):
        sweep(grid, fresh, device="cpu", progress=False, deadline=60, shipped=shipped, hardware="FakeGPU 1")
    assert not fresh.root.exists() or not list(fresh.root.glob("t1-*"))  # a preview makes nothing


def sweep_fmt(seconds: float) -> str:
    from workbench.train.sweep import fmt_time

    return fmt_time(seconds)
