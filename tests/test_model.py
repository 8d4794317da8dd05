"""The classifier, its hooks and the core schemes: tests that fail if the maths is wrong."""
import math

import pytest
import torch

from workbench.model import ModelConfig, PEClassifier, list_schemes
from workbench.model.pe.alibi import alibi_slopes
from workbench.model.pe.rope import rotate_pairs

ALL = list(list_schemes())


def model_for(cfg):
    torch.manual_seed(0)
    return PEClassifier(cfg).eval()


def is_toeplitz(m: torch.Tensor) -> bool:
    n_q, n_k = m.shape[-2:]
    return all(torch.allclose(m[..., i, j], m[..., i + 1, j + 1]) for i in range(n_q - 1) for j in range(n_k - 1))


# ---- every scheme, both architectures ---------------------------------------------------------
@pytest.mark.parametrize("arch", ["paper", "decoder"])
@pytest.mark.parametrize("scheme", ALL)
def test_train_step_and_fast_path_match_explicit(scheme, arch, tiny_cfg, tokens):
    model = PEClassifier(tiny_cfg(scheme, arch))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    loss = model.loss(tokens, torch.arange(5) % 6)
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p)]
    assert any("W_Q" in n or "W_DQ" in n for n in changed), "attention weights must receive gradients"
    model.eval()
    fast = model(tokens)
    explicit, cache = model.run_with_cache(tokens)
    from transformer_lens import ActivationCache  # here, not at the top: 2 CPU-s in every worker's collection

    assert isinstance(cache, ActivationCache)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    assert cache["blocks.1.attn.hook_z"].shape == (5, 16, 4, 8)
    assert cache["blocks.0.attn.hook_pattern"].shape == (5, 4, 16, 16)
    assert model.blocks[0].attn.W_O.shape[0] == 4 and model.blocks[0].attn.W_O.shape[-1] == 32


def test_hook_shapes_follow_transformer_lens(tiny_cfg, tokens):
    model = model_for(tiny_cfg("alibi"))
    _, cache = model.run_with_cache(tokens)
    for name in ("q", "k", "v", "rot_q", "rot_k", "z"):
        assert cache[f"blocks.0.attn.hook_{name}"].shape == (5, 16, 4, 8), name
    assert cache["blocks.0.attn.hook_attn_scores"].shape == (5, 4, 16, 16)
    assert cache["blocks.0.attn.hook_pos_bias"].shape == (4, 16, 16)
    for name in ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out"):
        assert cache[f"blocks.1.hook_{name}"].shape == (5, 16, 32)
    assert cache["hook_embed"].shape == (5, 16, 32)
    assert (cache["blocks.0.attn.hook_pattern"].sum(-1) - 1).abs().max() < 1e-5


def test_hooks_context_removes_what_transformer_lens_removes(tiny_cfg, tokens):
    """PEClassifier's faster `remove_all_hook_fns` leaves the same hooks as TransformerLens' own: a permanent hook
    and an outer context's hook stay, the inner context's (forward and backward) go."""
    from workbench.model.tl import HookedRootModule

    def hooked_state(model):
        return {n: (len(hp.fwd_hooks), len(hp.bwd_hooks), len(hp._forward_hooks), len(hp._backward_hooks))
                for n, hp in model.hook_dict.items() if hp.fwd_hooks or hp.bwd_hooks or hp._forward_hooks}

    seen = []

    def note(t, hook):
        seen.append(hook.name)

    states = []
    for remove in (PEClassifier.remove_all_hook_fns, HookedRootModule.remove_all_hook_fns):
        model = model_for(tiny_cfg("rope"))
        model.remove_all_hook_fns = remove.__get__(model)
        model.blocks[0].hook_resid_pre.add_perma_hook(note)
        with model.hooks(fwd_hooks=[("blocks.1.hook_resid_mid", note)]):
            with model.hooks(fwd_hooks=[("blocks.1.hook_resid_mid", note), ("blocks.0.attn.hook_z", note)],
                             bwd_hooks=[("hook_embed", note)]):
                inner = hooked_state(model)
            states.append((inner, hooked_state(model)))
        states[-1] += (hooked_state(model),)
        seen.clear()
        model(tokens)
        assert seen == ["blocks.0.hook_resid_pre"]  # only the permanent hook fires after both contexts
    assert states[0] == states[1]
    inner, outer, after = states[0]
    assert inner["blocks.1.hook_resid_mid"][0] == 2 and "hook_embed" in inner and "blocks.0.attn.hook_z" in inner
    assert set(outer) == {"blocks.0.hook_resid_pre", "blocks.1.hook_resid_mid"} and set(after) == {
        "blocks.0.hook_resid_pre"}


# ---- RoPE ----------------------------------------------------------------------------------------
def rotation_reference(x: torch.Tensor, pos: int, base: float = 10000.0) -> torch.Tensor:
    """Explicit block-diagonal rotation matrix applied to a [d] vector."""
    d = x.shape[-1]
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        a = pos * base ** (-2 * i / d)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return R @ x.double()


def test_rope_equals_rotation_matrix_and_is_relative(tiny_cfg):
    attn = model_for(tiny_cfg("rope")).blocks[0].attn
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 16, 4, 8, generator=g), torch.randn(1, 16, 4, 8, generator=g)
    rq, rk = attn.rotate(q, k)
    for p in (0, 3, 15):
        torch.testing.assert_close(rq[0, p, 2].double(), rotation_reference(q[0, p, 2], p), atol=1e-5, rtol=1e-5)
    # the same two vectors placed at (m, n) and (m + s, n + s) give the same score
    qv, kv = q[0, 0, 0], k[0, 0, 0]
    same = torch.zeros(1, 16, 4, 8)
    qq, kk = same.clone(), same.clone()
    qq[0, :, 0], kk[0, :, 0] = qv, kv
    rq, rk = attn.rotate(qq, kk)
    s = (rq[0, :, 0] @ rk[0, :, 0].T)  # [m, n]
    assert is_toeplitz(s)
    assert not torch.allclose(s[0, 0], s[0, 5])  # but it does depend on the offset


def test_partial_rope_masks_leave_heads_position_free(tiny_cfg):
    model = model_for(tiny_cfg("rope", scheme_kwargs={"rope_heads": 1, "rope_layers": [1]}))
    q = torch.randn(2, 16, 4, 8)
    for layer, rotated in ((0, set()), (1, {0})):
        rq, _ = model.blocks[layer].attn.rotate(q, q)
        for h in range(4):
            assert torch.allclose(rq[:, :, h], q[:, :, h]) == (h not in rotated), (layer, h)
    frac = model_for(tiny_cfg("rope", scheme_kwargs={"rotary_fraction": 0.5})).blocks[0].attn
    rq, _ = frac.rotate(q, q)
    assert torch.equal(rq[..., 4:], q[..., 4:]) and not torch.allclose(rq[:, 1:, :, :4], q[:, 1:, :, :4])
    # the rotating dims are a RoPE of width d_rot = 4: theta_i = 10000^(-2i/4) = 1, 0.01 (not 10000^(-2i/8))
    torch.testing.assert_close(frac.inv_freq, torch.tensor([1.0, 0.01]))
    pos = 3
    plane1 = rq[0, pos, 0, 2:4]  # plane 1 at position 3 turned by 3 x 0.01 rad
    c, s_ = math.cos(pos * 0.01), math.sin(pos * 0.01)
    x, y = q[0, pos, 0, 2], q[0, pos, 0, 3]
    torch.testing.assert_close(plane1, torch.stack([x * c - y * s_, x * s_ + y * c]))


def test_rotate_pairs_preserves_norm():
    x = torch.randn(3, 7, 2, 8)
    ang = torch.rand(7, 1, 4).repeat_interleave(2, -1) * 6
    torch.testing.assert_close(rotate_pairs(x, ang.cos(), ang.sin()).norm(dim=-1), x.norm(dim=-1))


# ---- additive biases -------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["alibi", "relative", "t5"])
def test_logit_biases_are_toeplitz(scheme, tiny_cfg):
    attn = model_for(tiny_cfg(scheme)).blocks[1].attn
    bias = attn.pos_bias(16, 16)
    assert bias.shape == (4, 16, 16)
    assert is_toeplitz(bias)
    assert bias.std() > 0


@pytest.mark.parametrize("arch", ["paper", "decoder"])
def test_t5_bias_reads_the_bucket_of_each_offset(arch, tiny_cfg):
    """b[h, i, j] = rel_bias[h, bucket(j - i)], 32 buckets: bidirectional (paper arch) keys after the query take
    buckets 16 + d, keys before it d (exact below 8: half of each sign's 16); causal (decoder) one side only,
    offsets j > i all bucket 0. Hand-counted buckets, not t5_bucket's."""
    attn = model_for(tiny_cfg("t5", arch)).blocks[1].attn
    bias, rel = attn.pos_bias(16, 16), attn.rel_bias.detach()
    after, before = (18, 2) if arch == "paper" else (0, 2)  # key 2 after the query, key 2 before it
    torch.testing.assert_close(bias[:, 3, 5], rel[:, after])
    torch.testing.assert_close(bias[:, 5, 3], rel[:, before])
    torch.testing.assert_close(bias[:, 4, 4], rel[:, 0])
    if arch == "paper":
        torch.testing.assert_close(bias[:, 0, 7], rel[:, 16 + 7])  # the last exact bucket after the query


def test_alibi_slopes_and_values(tiny_cfg):
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2 ** (-h) for h in range(1, 9)], dtype=torch.float32))
    # the authors' released code: exp(-h/H) for h = 0..H-1 (docs/paper.md §7), so head 0 has slope 1
    torch.testing.assert_close(alibi_slopes(4, "paper"), torch.exp(-torch.arange(0, 4) / 4.0))
    bias = model_for(tiny_cfg("alibi")).blocks[0].attn.pos_bias(5, 5)
    assert bias[1, 0, 3].item() == pytest.approx(-3 * 2 ** (-4))
    assert bias[1, 3, 0].item() == bias[1, 0, 3].item()


def test_t5_buckets_saturate_and_are_directional(tiny_cfg):
    from workbench.model.pe.t5 import t5_bucket

    rel = torch.arange(-300, 301)
    b = t5_bucket(rel, True, 32, 128)
    assert b.min() >= 0 and b.max() <= 31
    assert b[rel == 5].item() != b[rel == -5].item()
    assert b[rel == 200].item() == b[rel == 300].item()
    assert b[rel == 0].item() == 0 and t5_bucket(torch.tensor([3]), True, 32, 128).item() == 16 + 3


# ---- architectures -------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ALL)
def test_paper_arch_permutation_invariance_only_for_nope(scheme, tiny_cfg, tokens):
    model = model_for(tiny_cfg(scheme))
    t = tokens[1:3]  # no padding
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    same = torch.allclose(model(t), model(t[:, perm]), atol=1e-5)
    assert same == (scheme == "nope"), scheme


@pytest.mark.parametrize("scheme", ["rope", "alibi", "nope", "learned"])
def test_decoder_is_causal(scheme, tiny_cfg, tokens):
    model = model_for(tiny_cfg(scheme, "decoder"))
    t2 = tokens.clone()
    t2[:, 9] = (t2[:, 9] % 23) + 1
    _, c1 = model.run_with_cache(tokens)
    _, c2 = model.run_with_cache(t2)
    r1, r2 = c1["blocks.1.hook_resid_post"], c2["blocks.1.hook_resid_post"]
    torch.testing.assert_close(r1[:, :9], r2[:, :9])
    assert not torch.allclose(r1[1, 9:], r2[1, 9:])


def test_readout_ignores_pads_unless_asked(tiny_cfg, tokens):
    model = model_for(tiny_cfg("rope"))
    longer = torch.cat([tokens[3:4], torch.zeros(1, 0, dtype=torch.long)], 1)
    a = model(tokens[3:4, :6])
    b = model(longer)  # same 6 tokens then pads
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    with_pad = model_for(tiny_cfg("rope", readout_include_pad=True))
    with_pad.load_state_dict(model.state_dict())
    assert not torch.allclose(with_pad(tokens[3:4, :6]), with_pad(longer), atol=1e-4)


# ---- hooks act on the computation -----------------------------------------------------------------
def test_editing_pattern_and_z_changes_output(tiny_cfg, tokens):
    model = model_for(tiny_cfg("rope"))
    clean = model(tokens)

    def zero_head(z, hook):
        z[:, :, 1] = 0
        return z

    def uniform(p, hook):
        return torch.full_like(p, 1 / p.shape[-1])

    for name, fn in (("blocks.0.attn.hook_z", zero_head), ("blocks.0.attn.hook_pattern", uniform)):
        assert not torch.allclose(model.run_with_hooks(tokens, fwd_hooks=[(name, fn)]), clean)


def test_zeroing_every_head_leaves_only_the_embedding_path(tiny_cfg, tokens):
    model = model_for(tiny_cfg("rope"))
    hooks = [(f"blocks.{l}.attn.hook_z", lambda z, hook: torch.zeros_like(z)) for l in range(2)]
    ablated = model.run_with_hooks(tokens, fwd_hooks=hooks)
    no_attn = model_for(tiny_cfg("rope"))
    no_attn.load_state_dict(model.state_dict())
    with torch.no_grad():
        for b in no_attn.blocks:
            b.attn.W_O.zero_()
    torch.testing.assert_close(ablated, no_attn(tokens))
    # and the embedding path alone is what it says: x = M + b_O + mlp(...), per block
    x = model.embed_input(tokens)
    for b in model.blocks:
        x = x + b.attn.b_O
        x = x + b.mlp(b.ln2(x))
    torch.testing.assert_close(ablated, model.unembed(model.ln_final(model.readout(x, tokens))))


def test_transformer_lens_patching_runs(tiny_cfg, tokens):
    from transformer_lens import ActivationCache, patching

    model = model_for(tiny_cfg("rope"))
    _, cache = model.run_with_cache(tokens)
    zero = ActivationCache({k: torch.zeros_like(v) for k, v in cache.items()}, model)
    out = patching.get_act_patch_attn_head_out_all_pos(model, tokens, zero, lambda lg: lg[:, 0].mean())
    assert out.shape == (2, 4) and out.abs().sum() > 0


def test_nnsight_reads_the_same_q_as_run_with_cache(tiny_cfg, tokens):
    from nnsight import NNsight

    model = model_for(tiny_cfg("rope"))
    logits, cache = model.run_with_cache(tokens)
    wrapped = NNsight(model)
    with wrapped.trace(tokens):
        pattern = wrapped.blocks[0].attn.hook_pattern.output.save()
        q = wrapped.blocks[1].attn.hook_q.output.save()
        out = wrapped.output.save()
    torch.testing.assert_close(q, cache["blocks.1.attn.hook_q"])
    torch.testing.assert_close(pattern, cache["blocks.0.attn.hook_pattern"])
    torch.testing.assert_close(out, logits)


def test_fast_path_is_used_only_without_observers(tiny_cfg, tokens):
    model = model_for(tiny_cfg("rope"))
    attn = model.blocks[0].attn
    assert attn.fast_path_ok()
    model.add_hook("blocks.0.attn.hook_pattern", lambda p, hook: p)
    assert not attn.fast_path_ok()
    model.reset_hooks()
    assert attn.fast_path_ok()


# ---- bad configs --------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, words", [
    (dict(n_heads=5), "must divide d_model"),
    (dict(scheme="nosuch"), "unknown scheme"),
    (dict(n_heads=32, d_model=32), "even d_head"),
    (dict(arch="transformer"), "arch"),
    (dict(arch="decoder", readout_include_pad=True), "readout_include_pad"),
    (dict(final_ln="middle"), "final_ln"),
    (dict(dropout_sites=["attn_out", "embed"]), "dropout_sites"),
    (dict(unembed_vocab=True, vocab_size=4), "unembed_vocab"),
    (dict(scheme="rope", scheme_kwargs={"rope_read": "authors"}), "rope_read"),
    (dict(scheme="mla", scheme_kwargs={"rope_read": "sideways"}), "rope_read"),
    (dict(scheme="sinusoidal", scheme_kwargs={"layout": "halves"}), "layout"),
    (dict(scheme="rope", scheme_kwargs={"rope_heads": 9}), "rope_heads"),
    (dict(scheme="alibi", scheme_kwargs={"slope": "x"}), "unknown scheme_kwargs"),
    (dict(dropout=1.5), "dropout"),
])
def test_bad_configs_say_what_to_change(kw, words, tiny_cfg):
    with pytest.raises(ValueError, match=words):
        tiny_cfg(**kw)


def test_learned_refuses_longer_sequences(tiny_cfg):
    model = model_for(tiny_cfg("learned"))
    with pytest.raises(ValueError, match="cannot extrapolate"):
        model(torch.ones(1, 20, dtype=torch.long))
    assert model(torch.ones(1, 16, dtype=torch.long)).shape == (1, 6)


def test_config_round_trip(tiny_cfg):
    cfg = tiny_cfg("rope", scheme_kwargs={"rope_heads": [1, 2]})
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown model config fields"):
        ModelConfig.from_dict(cfg.to_dict() | {"bogus": 1})


_TL_SHAPE = """
import sys, types
import transformer_lens, transformer_lens.utilities
print(repr({n: sorted(k for k, v in vars(m).items() if isinstance(v, types.ModuleType) or not k.startswith("_"))
            for n, m in sys.modules.items() if n.startswith("transformer_lens") and hasattr(m, "__path__")}))
"""


def test_the_model_imports_transformer_lens_hook_classes_without_its_package_and_the_package_is_whole_after():
    """`workbench.model.tl`: building a model imports neither TransformerLens' package `__init__` nor `transformers`
    / `datasets` (2 CPU-s a process); a later `import transformer_lens` gives the same classes and packages with the
    same names and modules as an import without workbench before it; run_with_cache still gives an ActivationCache."""
    import subprocess
    import sys

    def run(code):
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    code = ("import sys; from workbench.model import PEClassifier, ModelConfig; "
            "print(sorted(m for m in ('transformer_lens', 'transformers', 'datasets') if m in sys.modules)); "
            "import torch; m = PEClassifier(ModelConfig(scheme='rope', d_model=16, n_heads=2, d_ff=16, n_layers=1, "
            "vocab_size=8, max_len=6, n_classes=2)); "
            "_, cache = m.run_with_cache(torch.ones(1, 6, dtype=torch.long)); import transformer_lens as tl, "
            "workbench.model.tl as ours; print(type(cache).__name__, tl.HookedRootModule is ours.HookedRootModule, "
            "tl.hook_points.HookPoint is ours.HookPoint, [type(f).__name__ for f in sys.meta_path])" + _TL_SHAPE)
    first, classes, shape = run(code).splitlines()
    assert first == "[]", "importing the model imported TransformerLens' package"
    assert classes.startswith("ActivationCache True True") and "_GivesModules" not in classes, classes
    assert shape == run(_TL_SHAPE).strip()  # the packages as a plain `import transformer_lens` makes them
