"""The GPU path (issue 23): fused attention with dropout, the lean loop's checkpoints, the eval-mode training
accuracy, the GPU memory estimate. CPU tests run everywhere; `gpu` tests need CUDA and skip without it."""
import math

import pytest
import torch

from workbench.model import PEClassifier
from workbench.model.attention import Attention, use_fused_dropout
from workbench.store import RunStore
from workbench.train import resolve_config, train
from workbench.train.loop import derive_seed, train_subset
from workbench.train.presets import estimate_gpu_memory

TINY = ["train.epochs=2", "task.n_examples=400"]


def _tokens(n=16, length=40, vocab=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(1, vocab, (n, length), generator=g)
    for i in range(0, n, 3):
        t[i, length // 2:] = 0  # some right padding
    return t


def _model(tiny_cfg, dropout, d_model=64, n_heads=2, scheme="rope"):
    # d_head 32 x 40 key positions passes the CPU gate, so SDPA is taken where allowed
    torch.manual_seed(0)
    return PEClassifier(tiny_cfg(scheme=scheme, d_model=d_model, n_heads=n_heads, max_len=40, dropout=dropout,
                                 dropout_sites=["attn_weights"]))


@pytest.mark.parametrize("scheme", ["rope", "nope", "alibi"])
def test_fused_and_explicit_paths_agree_in_train_mode_at_dropout_0(tiny_cfg, scheme):
    model = _model(tiny_cfg, 0.0, scheme=scheme).train()
    x = _tokens()
    use_fused_dropout(model, True)
    assert all(m.fast_path_ok(40, x.device) for m in model.modules() if isinstance(m, Attention))
    fast = model(x)
    for m in model.modules():
        if isinstance(m, Attention):
            m.cfg.use_sdpa = False  # every layer on the explicit path (cfg is shared)
    assert not any(m.fast_path_ok(40, x.device) for m in model.modules() if isinstance(m, Attention))
    explicit = model(x)
    assert (fast - explicit).abs().max().item() < 1e-5


def test_attention_dropout_takes_sdpa_only_when_the_run_asks(tiny_cfg):
    model = _model(tiny_cfg, 0.3).train()
    attn = [m for m in model.modules() if isinstance(m, Attention)]
    assert not any(m.fast_path_ok(40, torch.device("cpu")) for m in attn)  # default: explicit (old results)
    use_fused_dropout(model, True)
    assert all(m.fast_path_ok(40, torch.device("cpu")) for m in attn)
    model.eval()  # eval mode: no dropout, SDPA as before
    use_fused_dropout(model, False)
    assert all(m.fast_path_ok(40, torch.device("cpu")) for m in attn)


def test_fused_attention_dropout_keeps_one_minus_p_of_the_weights_and_gradients_flow(tiny_cfg):
    """With v = identity rows, z is the dropped-and-rescaled pattern itself: over many seeds the share of kept
    (non-zero) weights is about 1 - p, and their mean equals the undropped pattern's (the 1 / (1 - p) scale)."""
    p, n = 0.3, 32
    cfg = tiny_cfg(scheme="nope", d_model=64, n_heads=2, max_len=n, dropout=p, dropout_sites=["attn_weights"])
    attn = Attention(cfg, 0).train()
    use_fused_dropout(attn, True)
    q = torch.randn(4, n, 2, cfg.d_head)
    v = torch.eye(n).expand(4, 2, n, n).transpose(1, 2)  # [batch, pos, head, d_head = n]
    attn.project = lambda x_q, x_kv: (q, q, v)
    seen = []
    attn.hook_z.add_hook(lambda z, hook: seen.append(z.detach().clone()))
    x, mask = torch.zeros(4, n, cfg.d_model), torch.zeros(4, 1, n, n)
    assert attn.fast_path_ok(n, x.device)
    for seed in range(20):
        torch.manual_seed(seed)
        attn(x, x, mask)
    attn.eval()
    attn(x, x, mask)
    plain, dropped = seen[-1], torch.stack(seen[:-1])
    assert plain.min() > 0 and torch.allclose(plain.sum(-1), torch.ones(()), atol=1e-5)
    share = (dropped != 0).float().mean().item()
    assert abs(share - (1 - p)) < 0.01, share  # 20 x 4 x 32 x 2 x 32 draws: sd about 0.001
    kept = dropped[dropped != 0] / plain.expand_as(dropped)[dropped != 0]
    assert torch.allclose(kept, torch.full_like(kept, 1 / (1 - p)), rtol=1e-4)  # inverted-dropout scale
    attn.hook_z.remove_hooks()

    attn = Attention(cfg, 0).train()  # gradients flow through the fused path
    use_fused_dropout(attn, True)
    x = torch.randn(4, n, cfg.d_model, requires_grad=True)
    torch.manual_seed(0)
    out = attn(x, x, mask)
    out.square().mean().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0 and attn.W_Q.grad.abs().sum() > 0
    torch.manual_seed(1)
    assert not torch.equal(out, attn(x, x, mask))  # dropout really draws


def test_fused_attention_is_a_config_field_that_keeps_old_run_ids(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY)
    assert cfg["train"]["fused_attention"] is False
    old = {**cfg, "train": {k: v for k, v in cfg["train"].items() if k != "fused_attention"}}
    assert store.run_id(old) == store.run_id(cfg)  # configs written before the field keep their ids
    fused = resolve_config("smoke", "rope", "t1", sets=TINY + ["train.fused_attention=true"])
    assert store.run_id(fused) != store.run_id(cfg)
    assert resolve_config("paper", "rope", "t1")["train"]["fused_attention"] is True
    with pytest.raises(ValueError, match="fused_attention"):
        resolve_config("smoke", "rope", "t1", sets=["train.fused_attention=3"])


def test_train_subset_is_fixed_and_consumes_no_training_rng():
    state = torch.get_rng_state()
    a, b = train_subset(1000, 300, 42), train_subset(1000, 300, 42)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a, b) and len(a) == 300 and len(set(a.tolist())) == 300 and a.max() < 1000
    assert not torch.equal(a, train_subset(1000, 300, 43))
    assert len(train_subset(100, 300, 42)) == 100
    assert derive_seed(42, 0, "train_eval") != derive_seed(42, 0, "shuffle")


def test_train_acc_eval_is_the_eval_mode_accuracy_on_the_fixed_subset(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY, store=store)
    run = train(cfg, store, progress=False, device="cpu", threads=1)
    rows = run.metric_rows()
    assert all({"train_acc", "train_acc_eval", "train_loss_eval"} <= set(r) for r in rows)
    ds, model = run.load_dataset(), run.load_model("cpu")
    sub = train_subset(len(ds.train_y), len(ds.test_y), cfg["train"]["seed"])
    x, y = torch.as_tensor(ds.train_x)[sub], torch.as_tensor(ds.train_y)[sub]
    with torch.no_grad():
        acc = (model(x).argmax(-1) == y).float().mean().item()
    assert rows[-1]["train_acc_eval"] == pytest.approx(acc, abs=1e-6)
    assert run.final["train_acc_eval"] == rows[-1]["train_acc_eval"]


def test_checkpoint_every_n_epochs_resumes_exactly(tmp_path):
    sets = TINY[1:] + ["train.epochs=4"]
    straight_store = RunStore(tmp_path / "a", data_dir=tmp_path / "data")
    straight = train(resolve_config("smoke", "rope", "t1", sets=sets, store=straight_store), straight_store,
                     progress=False, device="cpu", threads=1)
    store = RunStore(tmp_path / "b", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=sets, store=store)

    class Crash(RuntimeError):
        pass

    def crash(run, row):
        if row["epoch"] == 3:
            raise Crash("after epoch 3, before its checkpoint")

    for bad in (0, True, 1.0):  # True is an int to Python, not a number of epochs
        with pytest.raises(ValueError, match="checkpoint-every"):
            train(cfg, store, progress=False, device="cpu", checkpoint_every=bad)
    with pytest.raises(Crash):  # checkpoint at epoch 2 only; epoch 3 recorded, then a crash
        train(cfg, store, progress=False, device="cpu", threads=1, checkpoint_every=2, on_epoch=crash)
    run = store.get(store.run_id(cfg))
    assert run.load_checkpoint()[2]["epoch"] == 2 and run.info["checkpoint_every"] == 2
    resumed = train(cfg, store, progress=False, device="cpu", threads=1, resume=True, checkpoint_every=2)
    assert resumed.status == "finished" and resumed.info["resumed_from_epoch"] == 2
    keys = ["epoch", "step", "lr", "train_loss", "train_acc", "train_acc_eval", "test_loss", "test_acc"]
    assert straight.metrics()[keys].to_dict("records") == resumed.metrics()[keys].to_dict("records")
    wa, wb = straight.model_tensors(), resumed.model_tensors()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_gpu_memory_estimate_grows_with_the_batch_and_the_model():
    small = resolve_config("smoke", "rope", "t1")
    paper = resolve_config("paper", "rope", "t1")
    bigger_batch = resolve_config("paper", "rope", "t1", sets=["train.batch_size=1024"])
    assert estimate_gpu_memory(small) < estimate_gpu_memory(paper) < estimate_gpu_memory(bigger_batch)
    assert 2e9 < estimate_gpu_memory(paper) < 20e9  # measured: 8 paper runs filled an 80 GB H100


def test_sweep_workers_are_not_shrunk_on_cpu():
    from workbench.train.sweep import fit_workers

    assert fit_workers(3, [resolve_config("smoke", "rope", "t1")], "cpu", print) == 3


def test_a_run_can_put_one_sdpa_backend_first_for_all_its_training_recorded_and_checked_first(tmp_path):
    """`train(sdpa_backend=...)` / `--sdpa-backend`: the whole run (compilation included) trains in
    `sdpa_kernel([that backend, the others], set_priority=True)`, so PyTorch's priority order starts with it while
    it trains, every backend stays enabled for the calls it cannot run, and both are restored after; run.json
    records it (None: PyTorch's choice). An unknown backend, or one with --workers / --pack, is refused before
    anything is made."""
    from typer.testing import CliRunner

    from workbench.cli import app

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY[1:] + ["train.epochs=1"], store=store)
    seen = []

    from torch.nn.attention import SDPBackend

    def state():
        return (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled(),
                torch.backends.cuda.mem_efficient_sdp_enabled(), torch._C._get_sdp_priority_order()[0])

    def flags(run, row):
        seen.append(state())

    before = state()
    run = train(cfg, store, progress=False, device="cpu", threads=1, sdpa_backend="math", on_epoch=flags)
    assert seen == [(True, True, True, int(SDPBackend.MATH))] and run.info["sdpa_backend"] == "math"
    assert state() == before and before[3] != int(SDPBackend.MATH)
    other = resolve_config("smoke", "nope", "t1", sets=TINY[1:] + ["train.epochs=1"], store=store)
    with pytest.raises(ValueError, match="SDPA backend 'flashy': use one of flash_attention, "):
        train(other, store, progress=False, device="cpu", sdpa_backend="flashy")
    assert not store.exists(store.run_id(other))
    res = CliRunner().invoke(app, ["train", "--preset", "smoke", "--root", str(tmp_path / "r2"),
                                   "--sdpa-backend", "flashy"])
    assert res.exit_code == 2 and "use one of" in res.output and not (tmp_path / "r2").exists()
    grid = tmp_path / "g.toml"
    grid.write_text('name = "g"\npreset = "smoke"\ntasks = ["trigger-distance"]\nseeds = [42]\nschemes = ["rope"]\n')
    res = CliRunner().invoke(app, ["sweep", str(grid), "--root", str(tmp_path / "r3"), "--sdpa-backend", "math",
                                   "--workers", "2"])
    assert res.exit_code == 2 and "one run after another" in res.output and not (tmp_path / "r3").exists()
    for extra, says in ((["--deadline", "60", "--pack", "2"], "--deadline 60.0: one run after another"),
                        (["--deadline", "0"], "seconds > 0"),
                        (["--deadline", "60", "--hardware", "NVIDIA H100 80GB HBM3"], "use it with --dry-run"),
                        (["--deadline", "60", "--dry-run", "--hardware", "NVIDIA H100 80GB HBM3", "--shipped",
                          str(tmp_path)], "no finished run in")):  # `sweep.check_options`, before the store is made
        res = CliRunner().invoke(app, ["sweep", str(grid), "--root", str(tmp_path / "r4")] + extra)
        assert res.exit_code == 2 and says in res.output and not (tmp_path / "r4").exists()


# ---- CUDA only ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_bf16_training_and_its_eval_match_fp32(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY, store=store)
    run = train(cfg, store, progress=False, device="cuda")
    assert run.info["device"].startswith("cuda") and run.info["amp"] is True and run.info["peak_gpu_mb"] > 0
    rows = run.metric_rows()
    assert all(math.isfinite(r["train_loss"]) for r in rows) and rows[-1]["train_loss"] < rows[0]["train_loss"]
    from workbench.train.loop import evaluate

    model, ds = run.load_model("cuda"), run.load_dataset()
    x, y = torch.as_tensor(ds.test_x).cuda(), torch.as_tensor(ds.test_y).cuda()
    loss32, acc32 = evaluate(model, x, y, 256, amp=False)
    loss16, acc16 = evaluate(model, x, y, 256, amp=True)
    assert abs(loss16 - loss32) <= 0.02 * loss32 and abs(acc16 - acc32) <= 0.02


@pytest.mark.gpu
def test_cuda_resume_continues_from_the_checkpoint(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=TINY[1:] + ["train.epochs=3"], store=store)
    run = train(cfg, store, progress=False, device="cuda", stop_after_epochs=1)
    assert run.status == "interrupted"
    done = train(cfg, store, progress=False, device="cuda", resume=True)
    assert done.status == "finished" and [r["epoch"] for r in done.metric_rows()] == [1, 2, 3]


@pytest.mark.gpu
def test_cuda_memory_estimate_bounds_the_measured_peak(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("repro", "rope", "t1", sets=["train.epochs=1", "task.n_examples=2000"], store=store)
    run = train(cfg, store, progress=False, device="cuda")
    peak = run.info["peak_gpu_mb"] * 2**20
    assert peak < estimate_gpu_memory(cfg) < 20 * peak + 1e9  # an upper estimate, not wildly off


def test_gpu_memory_limits_are_enforced_without_a_gpu(monkeypatch, tmp_path):
    """The CUDA decisions with the free memory faked: refuse a run that does not fit, shrink workers and packs."""
    import workbench.train.loop as loop
    import workbench.train.presets as presets
    from workbench.train.presets import check_gpu_memory
    from workbench.train.sweep import fit_workers, plan_packs

    cfg = resolve_config("smoke", "rope", "t1")
    need = estimate_gpu_memory(cfg)
    cuda = torch.device("cuda")
    monkeypatch.setattr(loop, "pick_device", lambda device=None: cuda)
    monkeypatch.setattr(presets, "gpu_free_bytes", lambda device: 2.5 * need)
    check_gpu_memory(cfg, cuda)  # fits
    notes = []
    assert fit_workers(4, [cfg], "cuda", notes.append) == 2 and "only 2 runs fit" in notes[0]
    store = RunStore(tmp_path / "runs")  # empty: every job is a new run
    jobs = [(f"[{s}]", resolve_config("smoke", "rope", "t1", seed=s)) for s in (1, 2, 3, 4, 5)]
    assert plan_packs(jobs, store, "auto", "cuda") == [[0, 1], [2, 3], [4]]
    assert plan_packs(jobs, store, 3, "cuda") == [[0, 1], [2, 3], [4]]  # --pack 3 shrinks to what fits
    monkeypatch.setattr(presets, "gpu_free_bytes", lambda device: 0.5 * need)
    with pytest.raises(ValueError, match="GPU memory.*lower train.batch_size"):
        check_gpu_memory(cfg, cuda)
    with pytest.raises(ValueError, match="more than cuda has free"):
        fit_workers(2, [cfg], "cuda", notes.append)


@pytest.mark.gpu
def test_cuda_head_ablation_matches_the_cpu_one(tmp_path):
    """`ship --device cuda` runs the head ablations on the GPU beside a sweep (153 s on 8 CPU threads for a
    paper-scale run): the same table as the CPU's within fp32 summation order (an example whose prediction flips
    on a near-tie moves an accuracy by 1 / n), its device in `analysed_on`."""
    from workbench.analysis import ablation

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    run = train(resolve_config("smoke", "rope", "t1", sets=TINY, store=store), store, progress=False,
                device="cpu", threads=1)
    tables = {}
    for dev in ("cpu", "cuda"):
        tables[dev] = ablation.run(run, device=dev, n_boot=50, max_examples=200)
        assert set(tables[dev]["analysed_on"]) == {dev}
    a, b = tables["cpu"], tables["cuda"]
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    num = [c for c in a.columns if a[c].dtype.kind == "f"]
    assert num and all(float((a[c] - b[c]).abs().max()) <= 0.011 for c in num), num


def test_the_triton_backend_without_the_triton_package_says_what_to_do(monkeypatch):
    """`--sdpa-backend triton` where the kernel module cannot be imported (no triton package): a ValueError that
    names the package and the other choice, before anything trains."""
    import sys

    from workbench.train.loop import sdpa_backend_context

    monkeypatch.setitem(sys.modules, "workbench.model.triton_attention", None)  # import fails, as without triton
    with pytest.raises(ValueError, match="needs the triton package .* or pick another backend"):
        sdpa_backend_context("triton")


@pytest.mark.gpu
def test_the_triton_attention_kernel_agrees_with_sdpa_on_the_gpu():
    """PE-Lab's Triton kernel on the card (tests/test_triton_attention.py runs it in the interpreter on CPU):
    `kernel_agreement` at the paper's RoPE and MLA attention shapes (batch 64), bf16, forward and gradients."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu_step

    cfgs = [gpu_step.tier1_config(s, "paper", ["train.batch_size=64"]) for s in ("rope", "mla")]
    got = gpu_step.kernel_agreement(cfgs, torch.device("cuda"), amp=True)
    assert got["ok"], got
