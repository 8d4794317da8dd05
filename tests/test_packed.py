"""Packed runs (workbench/train/packed.py): K seeds trained as one stacked model equal their solo runs (on CPU
bit for bit: metrics, weights, optimizer state)."""
import pytest
import torch
from typer.testing import CliRunner

from workbench.analysis.claims import cpu_time_share
from workbench.cli import app
from workbench.store import RunStore
from workbench.train import resolve_config, sweep, train
from workbench.train.packed import check_packable, fold_attention, pack_key, packed_sdpa, train_packed

SETS = ["task.n_examples=400", "train.epochs=2", "train.grad_clip=0.5"]  # clipping: per run, not over the pack
KEYS = ["epoch", "step", "lr", "train_loss", "train_acc", "train_acc_eval", "train_loss_eval", "test_loss",
        "test_acc"]


def _configs(store, seeds=(42, 43, 44), sets=SETS, scheme="rope"):
    return [resolve_config("smoke", scheme, "t1", seed=s, sets=sets, store=store) for s in seeds]


def _assert_same_metrics(a, b, tol=0.0):
    ra, rb = a.metric_rows(), b.metric_rows()
    assert [r["epoch"] for r in ra] == [r["epoch"] for r in rb]
    for x, y in zip(ra, rb):
        for k in KEYS:
            assert abs(x[k] - y[k]) <= tol, (a.id, x["epoch"], k, x[k], y[k])


@pytest.fixture(scope="module")
def solo_and_packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("pack")
    solo_store = RunStore(root / "solo", data_dir=root / "data")
    pack_store = RunStore(root / "pack", data_dir=root / "data")
    solo = [train(c, solo_store, progress=False, device="cpu", threads=1) for c in _configs(solo_store)]
    packed = train_packed(_configs(pack_store), pack_store, progress=False, device="cpu", threads=1)
    return solo, packed


def test_each_packed_run_equals_its_solo_run(solo_and_packed):
    solo, packed = solo_and_packed
    for s, p in zip(solo, packed):
        assert p.status == "finished" and p.id == s.id and p.config == s.config
        assert p.path.name == s.path.name and p.info["packed"] == 3 and len(p.info["packed_with"]) == 2
        _assert_same_metrics(s, p)
        opt_s, opt_p = s.load_checkpoint()[1], p.load_checkpoint()[1]
        assert set(opt_s) == set(opt_p)  # the solo checkpoint format: each resumable alone
        assert all(torch.equal(opt_s[k], opt_p[k]) for k in opt_s)  # AdamW moments and RNG state
        ws, wp = s.model_tensors(), p.model_tensors()
        assert ws.keys() == wp.keys() and all(torch.equal(ws[k], wp[k]) for k in ws)
    assert len({p.final["train_loss"] for p in packed}) == 3  # three different runs, not one copied


def test_a_packed_run_records_the_session_fields_a_solo_run_does(solo_and_packed):
    """run.json of a packed run holds every field a solo run's has (`loop.mark_running`, shared), with the same
    values where they describe the run's setting rather than its process."""
    solo, packed = solo_and_packed
    for s, p in zip(solo, packed):
        only_solo = set(s.info) - set(p.info)
        assert only_solo <= {"stopped_at_deadline", "epoch_estimate_s", "triton_tuned"}, only_solo
        for k in ("status", "device", "amp", "compiled", "sdpa_backend", "gpu", "dataset_hash", "code_version",
                  "scheme_params", "threads", "epochs", "checkpoint_every", "error"):
            assert p.info[k] == s.info[k], k


def test_a_pack_counts_its_process_cpu_time_once(solo_and_packed):
    """Each packed run records a third of the pack process's CPU time, so a sum over the three is the process's
    time; runs packed before that rule (whole process time, no `pack_cpu_time_s`) are divided when read."""
    _, packed = solo_and_packed
    whole = packed[0].info["pack_cpu_time_s"]
    assert whole > 0 and all(p.info["pack_cpu_time_s"] == pytest.approx(whole, rel=0.05) for p in packed)
    assert sum(p.info["cpu_time_s"] for p in packed) == pytest.approx(whole, rel=0.05)
    assert [cpu_time_share(p.info) for p in packed] == [p.info["cpu_time_s"] for p in packed]
    assert cpu_time_share({"cpu_time_s": 1584.0, "packed": 2}) == 792.0  # packed before the rule
    assert cpu_time_share({"cpu_time_s": 724.0}) == 724.0  # solo


def test_a_stopped_pack_resumes_alone_and_packed(tmp_path, solo_and_packed):
    solo, _ = solo_and_packed
    store = RunStore(tmp_path / "runs", data_dir=solo[0].store.data_dir)
    cfgs = _configs(store)
    runs = train_packed(cfgs, store, progress=False, device="cpu", threads=1, stop_after_epochs=1)
    assert [r.status for r in runs] == ["interrupted"] * 3
    alone = train(cfgs[0], store, progress=False, device="cpu", threads=1, resume=True)  # one of them, solo
    assert alone.status == "finished" and alone.info["resumed_from_epoch"] == 1
    _assert_same_metrics(solo[0], alone)
    from workbench.store import StoreError

    with pytest.raises(StoreError, match="resume"):  # unfinished runs are not restarted without resume
        train_packed(cfgs, store, progress=False, device="cpu", threads=1, resume=False)
    finished_at = alone.info["finished"]
    runs = train_packed(cfgs, store, progress=False, device="cpu", threads=1, resume=True)  # the others, packed
    assert runs[0].info["finished"] == finished_at  # a finished run is left as it is
    for s, r in zip(solo[1:], runs[1:]):
        assert r.status == "finished" and r.info["packed"] == 2 and r.info["resumed_from_epoch"] == 1
        _assert_same_metrics(s, r)


def test_what_may_be_packed():
    a, b = (resolve_config("smoke", "rope", "t1", seed=s) for s in (42, 43))
    assert pack_key(a) == pack_key(b) is not None
    assert pack_key(resolve_config("smoke", "nope", "t1")) != pack_key(a)
    assert pack_key(resolve_config("smoke", "rope", "t1", sets=["model.dropout=0.1"])) is None
    with pytest.raises(ValueError, match="dropout"):
        check_packable([a, resolve_config("smoke", "rope", "t1", seed=43, sets=["model.dropout=0.1"])])
    with pytest.raises(ValueError, match="but their seeds"):
        check_packable([a, resolve_config("smoke", "nope", "t1", seed=43)])
    with pytest.raises(ValueError, match="distinct seeds"):
        check_packable([a, a])


def test_length_batching_runs_are_not_packed(tmp_path):
    """With train.batching=length each seed has its partial batch at a step of its own (and trims to its own
    sequences): a pack split every run's batches at the first run's sizes, so its later runs trained on other
    batches than alone. Such runs are not packable (`pack_key` None), `train_packed` refuses them saying what to
    change, and `sweep --pack` trains them alone."""
    sets = ["task.n_examples=400", "train.epochs=1", "train.batching=length"]
    a, b = (resolve_config("smoke", "rope", "t1", seed=s, sets=sets) for s in (42, 43))
    assert pack_key(a) is None and pack_key(b) is None
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    with pytest.raises(ValueError, match="train.batching=random"):
        train_packed([a, b], store, progress=False, device="cpu", threads=1)
    assert not store.exists(store.run_id(a))
    grid = {"name": "p", "preset": "smoke", "tasks": ["t1"], "seeds": [42, 43], "schemes": ["rope"],
            "set": {"task.n_examples": 400, "train.epochs": 1, "train.batching": "length"}}
    lines = []
    res = sweep(grid, store, device="cpu", threads=1, progress=False, pack=2, log=lines.append)
    assert [r["outcome"] for r in res] == ["trained"] * 2 and not any("in a pack" in line for line in lines)
    assert not any(store.get(r["id"]).info.get("packed") for r in res)


def test_a_pack_whose_pads_reach_the_output_equals_its_solo_runs(tmp_path):
    """Without the attention's pad mask the PAD embedding (row 0, `padding_idx`, not trained) reaches the output:
    vmap's embedding backward kept padding_idx for the pack's first run only, so the second trained its PAD row.
    Packed, each run's weights (PAD row 0) and metrics equal its solo run's bit for bit."""
    sets = ["task.n_examples=400", "train.epochs=1", "model.attn_pad_mask=false"]
    solo_store = RunStore(tmp_path / "solo", data_dir=tmp_path / "data")
    pack_store = RunStore(tmp_path / "pack", data_dir=tmp_path / "data")
    solo = [train(c, solo_store, progress=False, device="cpu", threads=1)
            for c in _configs(solo_store, (42, 43), sets)]
    packed = train_packed(_configs(pack_store, (42, 43), sets), pack_store, progress=False, device="cpu", threads=1)
    for s, p in zip(solo, packed):
        _assert_same_metrics(s, p)
        ws, wp = s.model_tensors(), p.model_tensors()
        assert all(torch.equal(ws[k], wp[k]) for k in ws), [k for k in ws if not torch.equal(ws[k], wp[k])]
        assert not wp["embed.weight"][0].any()


def test_a_resumed_pack_repairs_run_json_from_its_checkpoint(tmp_path):
    """As `train` (tests/test_train.py): a pack killed after its last checkpoint's commit and before run.json was
    written has no epoch left on resume; each run's run.json is re-read from its checkpoint and metric rows, so it
    finishes with the last epoch's record and digests, not the epoch before's."""
    import json

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfgs = _configs(store, (42, 43), ["task.n_examples=400", "train.epochs=2"])
    runs = train_packed(cfgs, store, progress=False, device="cpu", threads=1)
    done = [r.info for r in runs]
    for run, info in zip(runs, done):  # run.json as the kill left it: epoch 1's record, still running
        rows = run.metric_rows()
        before = dict(info, status="running", epoch=1, final={k: rows[0][k] for k in info["final"] if k in rows[0]},
                      metrics_sha256="0" * 64, weights={"sha256": "1" * 64, "epoch": 1}, pid=2 ** 22 + 7)
        (run.path / "run.json").write_text(json.dumps(before))
    resumed = train_packed(cfgs, store, progress=False, device="cpu", threads=1, resume=True)
    for r, info in zip(resumed, done):
        now = r.info
        assert r.status == "finished" and now["epoch"] == 2 and now["final"] == info["final"]
        assert now["metrics_sha256"] == info["metrics_sha256"] and now["weights"] == info["weights"]
        assert r.trust_problems() == []


def test_sweep_packs_runs_whose_checkpoints_are_of_one_epoch(tmp_path):
    """Two seeds both at run.json epoch 3, one checkpointed at 2 (crashed in epoch 3 with --checkpoint-every 2),
    one at 3: `train_packed` refuses runs stopped after different epochs, so `sweep --pack` grouped them by
    run.json's epoch and both ended failed; grouped by their checkpoints' epochs they train alone and finish."""
    from workbench.train.sweep import plan_packs

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    a, b = _configs(store, (42, 43), ["task.n_examples=400", "train.epochs=4"])

    def crash(run, row):
        if row["epoch"] == 3:
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        train(a, store, progress=False, device="cpu", threads=1, checkpoint_every=2, on_epoch=crash)
    train(b, store, progress=False, device="cpu", threads=1, stop_after_epochs=3)
    assert [store.get(store.run_id(c)).info["epoch"] for c in (a, b)] == [3, 3]
    assert plan_packs([("a", a), ("b", b)], store, 2, "cpu") == [[0], [1]]
    grid = {"name": "p", "preset": "smoke", "tasks": ["t1"], "seeds": [42, 43], "schemes": ["rope"],
            "set": {"task.n_examples": 400, "train.epochs": 4}}
    res = sweep(grid, store, device="cpu", threads=1, progress=False, pack=2, log=lambda m: None)
    assert [r["outcome"] for r in res] == ["resumed"] * 2


def test_sweep_packs_the_seeds_of_a_grid_point(tmp_path):
    grid = {"name": "p", "preset": "smoke", "tasks": ["trigger-distance"], "seeds": [42, 43], "schemes": ["rope"],
            "set": {"task.n_examples": 400, "train.epochs": 1},
            "variants": [{"name": "drop", "scheme": "nope", "set": {"model.dropout": 0.1}}]}
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    lines = []
    res = sweep(grid, store, device="cpu", threads=1, progress=False, pack=2, log=lines.append)
    assert [r["outcome"] for r in res] == ["trained"] * 4
    assert sum("in a pack of 2" in line for line in lines) == 2  # the rope seeds; dropout runs train alone
    packed = [store.get(r["id"]) for r in res if store.get(r["id"]).info.get("packed")]
    assert len(packed) == 2 and all(r.config["model"]["scheme"] == "rope" for r in packed)
    again = sweep(grid, store, device="cpu", threads=1, progress=False, pack="auto", log=lines.append)
    assert [r["outcome"] for r in again] == ["finished"] * 4
    with pytest.raises(ValueError, match="--pack"):
        sweep(grid, store, device="cpu", pack=0, log=lines.append)
    with pytest.raises(ValueError, match="without --workers"):
        sweep(grid, store, device="cpu", pack=2, workers=2, log=lines.append)


def test_cli_train_several_seeds_packs_them(tmp_path):
    root = str(tmp_path / "runs")
    args = ["train", "--preset", "smoke", "--seed", "42,43", "--set", "task.n_examples=400", "--set",
            "train.epochs=1", "--device", "cpu", "--threads", "1", "-q", "--root", root]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    ids = res.stdout.strip().splitlines()[-2:]
    assert len(ids) == 2 and "s42" in ids[0] and "s43" in ids[1]
    store = RunStore(root)
    assert all(store.get(i).info["packed"] == 2 for i in ids)
    bad = CliRunner().invoke(app, ["train", "--preset", "smoke", "--seed", "42,x", "--root", root])
    assert bad.exit_code == 2 and "comma-separated" in bad.output
    # length batching cannot be packed: trained one after another, and the note says why
    res = CliRunner().invoke(app, args[:-2] + ["--set", "train.batching=length", "--root", root])
    assert res.exit_code == 0 and "one after another (packed runs need train.batching='random'" in res.output, \
        res.output


@pytest.mark.parametrize("mask_shape", [(5, 1, 1, 7), (1, 1, 7), (5, 3, 6, 7)])
def test_folded_sdpa_under_vmap_equals_sdpa_on_each_slice_values_and_gradients(mask_shape):
    """`packed_sdpa` folds the pack into the batch (the CUDA pack's route round vmap's memory-efficient SDPA rule):
    per slice the same outputs and gradients as SDPA alone, with a per-run mask or one shared by the pack, and the
    pack axis anywhere in the physical tensor."""
    g = torch.Generator().manual_seed(0)
    q0, k0, v0 = (torch.randn(4, 5, 3, 6 if i == 0 else 7, 8, generator=g) for i in range(3))
    k0, v0 = k0.movedim(0, 2).contiguous(), v0  # k's pack axis physically at 2: vmap's in_dims follow
    mask = torch.where(torch.rand(4, *mask_shape, generator=g) > 0.3, 0.0, -1e4)
    mask[..., 0] = 0.0  # a key each query may see
    leaves = [t.clone().requires_grad_() for t in (q0, k0, v0)]
    folded = torch.func.vmap(lambda q, k, v, m: packed_sdpa(q, k, v, m, 0.0), in_dims=(0, 2, 0, 0))(*leaves, mask)
    (folded * torch.arange(folded.numel()).view_as(folded).sin()).sum().backward()
    ref_leaves = [t.clone().requires_grad_() for t in (q0, k0, v0)]
    q, k, v = ref_leaves[0], ref_leaves[1].movedim(2, 0), ref_leaves[2]
    ref = torch.stack([torch.nn.functional.scaled_dot_product_attention(q[i], k[i], v[i], attn_mask=mask[i])
                       for i in range(4)])
    (ref * torch.arange(ref.numel()).view_as(ref).sin()).sum().backward()
    assert folded.shape == (4, 5, 3, 6, 8) and torch.allclose(folded, ref, atol=1e-6)
    for a, b in zip(leaves, ref_leaves):
        assert torch.allclose(a.grad, b.grad, atol=1e-5)


def test_folded_sdpa_runs_in_the_autocast_dtype_as_a_solo_sdpa_does():
    """Under vmap autocast leaves SDPA in fp32 (it casts a solo call to bf16): the CUDA pack's attention ran in fp32
    kernels (profiled on an H200) until the fold cast its inputs. On CPU's autocast here, same rule."""
    g = torch.Generator().manual_seed(0)
    q, mask = torch.randn(3, 2, 4, 6, 32, generator=g), torch.zeros(3, 2, 1, 1, 6)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with torch.autocast("cpu", dtype=torch.bfloat16):
        solo = torch.stack([sdpa(q[i], q[i], q[i], attn_mask=mask[i]) for i in range(3)])
        folded = torch.func.vmap(lambda a, m: packed_sdpa(a, a, a, m, 0.0))(q, mask)
    assert solo.dtype == folded.dtype == torch.bfloat16 and torch.allclose(solo.float(), folded.float(), atol=1e-2)


@pytest.mark.parametrize("scheme", ["rope", "alibi"])
def test_a_pack_with_folded_attention_computes_what_it_computes_without(tiny_cfg, scheme):
    """The CUDA pack's forward (`fold_attention`), run on CPU: the K models' logits as vmap's own SDPA rule gives
    them (ALiBi: a bias in the mask shared by the pack)."""
    import copy

    from torch.func import functional_call, stack_module_state, vmap

    from workbench.model import PEClassifier

    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(PEClassifier(tiny_cfg(scheme=scheme, d_model=64, n_heads=2)))  # d_head 32: SDPA on CPU
    params, _ = stack_module_state(models)
    buffers = dict(models[0].named_buffers())
    x = torch.randint(1, 24, (2, 6, 16), generator=torch.Generator().manual_seed(1))
    x[:, 2, 9:] = 0  # right padding: the mask differs between sequences
    x[1, 4, 5:] = 0  # and between the runs
    outs, sdpa_calls = [], []
    for fold in (False, True):
        base = copy.deepcopy(models[0]).to("meta")
        if fold:
            fold_attention(base)
            for m in base.modules():
                if hasattr(m, "sdpa"):
                    m.sdpa = lambda *a, f=m.sdpa: sdpa_calls.append(1) or f(*a)
        outs.append(vmap(lambda p, xb: functional_call(base, (p, buffers), (xb,)))(params, x))
    assert len(sdpa_calls) == 2  # both layers took the folded route
    assert torch.allclose(outs[0], outs[1], atol=1e-5) and not torch.allclose(outs[0][0], outs[0][1])


@pytest.mark.gpu
def test_cuda_packed_runs_equal_their_solo_runs_within_bf16_tolerance(tmp_path):
    """bf16 autocast rounds differently in the stacked matmuls: the metrics agree to 0.02 (2 points of accuracy)."""
    solo_store = RunStore(tmp_path / "solo", data_dir=tmp_path / "data")
    pack_store = RunStore(tmp_path / "pack", data_dir=tmp_path / "data")
    solo = [train(c, solo_store, progress=False, device="cuda") for c in _configs(solo_store)]
    packed = train_packed(_configs(pack_store), pack_store, progress=False, device="cuda")
    for s, p in zip(solo, packed):
        assert p.id == s.id and p.info["peak_gpu_mb"] > 0
        _assert_same_metrics(s, p, tol=0.02)


@pytest.mark.parametrize("scheme", list(__import__("workbench.model.pe", fromlist=["x"]).list_schemes()))
def test_every_scheme_packs_or_says_why(tmp_path, scheme):
    """Over the registry: a scheme with a learned position bias is not packed and says why (a pack of Relative
    failed in SDPA's backward, 2026-12-06); every other scheme's pack of two trains an epoch whose runs equal their
    solo runs bit for bit."""
    from workbench.model.pe import get_scheme

    sets = ["task.n_examples=64", "train.epochs=1", "model.d_model=16", "model.n_heads=2", "model.n_layers=1"]
    packed, solo = RunStore(tmp_path / "packed"), RunStore(tmp_path / "solo")
    cfgs = _configs(packed, seeds=(42, 43), sets=sets, scheme=scheme)
    if get_scheme(scheme).learned_bias:
        assert pack_key(cfgs[0]) is None
        with pytest.raises(ValueError, match="learned position bias"):
            check_packable(cfgs)
        return
    runs = train_packed(cfgs, packed, progress=False, device="cpu", threads=1)
    alone = train(_configs(solo, seeds=(43,), sets=sets, scheme=scheme)[0], solo, progress=False, device="cpu",
                  threads=1)
    _assert_same_metrics(runs[1], alone)
    assert runs[0].info["scheme_params"] == alone.info["scheme_params"] == {k: v for k, (v, _) in get_scheme(scheme).params.items()}
