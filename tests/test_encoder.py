"""The `encoder` architecture (docs/paper.md §2): standard pre-LN bidirectional encoder, keys/values from LN1 of the
same layer, pad mask, masked mean after the final LayerNorm. Each test fails if that wiring were wrong."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench.analysis import ablation
from workbench.model import PEClassifier, list_schemes

ALL = list(list_schemes())


def hook_value(model, tokens, name, edit=None):
    """Activation `name` of one forward, optionally editing `blocks.1.hook_resid_pre` on the way."""
    out = {}

    def save(t, hook):
        out["v"] = t.detach().clone()

    hooks = [(name, save)]
    if edit is not None:
        hooks.insert(0, ("blocks.1.hook_resid_pre", edit))
    model.run_with_hooks(tokens, fwd_hooks=hooks)
    return out["v"]


@pytest.mark.parametrize("arch, moves", [("encoder", True), ("paper", False)])
def test_keys_come_from_the_same_layers_stream(arch, moves, tiny_cfg, tokens):
    """Encoder: editing layer 1's input changes layer 1's keys; paper arch: keys come from M and do not move."""
    model = PEClassifier(tiny_cfg("rope", arch)).eval()
    bump = lambda t, hook: t + 1.0  # noqa: E731
    clean = hook_value(model, tokens, "blocks.1.attn.hook_k")
    edited = hook_value(model, tokens, "blocks.1.attn.hook_k", bump)
    assert (not torch.allclose(clean, edited)) == moves
    # and the keys are W_K LN1(x_1) + b_K in the encoder, computed here by hand
    if arch == "encoder":
        x1 = hook_value(model, tokens, "blocks.1.hook_resid_pre")
        attn, ln1 = model.blocks[1].attn, model.blocks[1].ln1
        by_hand = torch.einsum("bpd,hde->bphe", F.layer_norm(x1, (32,), ln1.weight, ln1.bias), attn.W_K) + attn.b_K
        torch.testing.assert_close(clean, by_hand, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scheme", ALL)
def test_encoder_trains_and_fast_path_equals_explicit(scheme, tiny_cfg, tokens):
    model = PEClassifier(tiny_cfg(scheme, "encoder"))
    loss = model.loss(tokens, torch.arange(5) % 6)
    loss.backward()
    assert torch.isfinite(loss)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters() if "blocks.0.attn" in n)
    model.eval()
    fast = model(tokens)
    explicit, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    # bidirectional: the first query attends to later real tokens; pads get no weight
    pattern = cache["blocks.0.attn.hook_pattern"]
    assert pattern[1, :, 0, 1:].sum() > 0.1
    assert pattern[0, :, :, 11:].abs().max() < 1e-6


@pytest.mark.parametrize("scheme", ["rope", "nope", "alibi"])
def test_encoder_pads_are_inert_and_readout_is_layernormed_masked_mean(scheme, tiny_cfg, tokens):
    model = PEClassifier(tiny_cfg(scheme, "encoder")).eval()
    assert model.cfg.pads_are_inert
    short = tokens[3:4, :6]  # 6 real tokens, no pads
    padded = tokens[3:4]  # the same with 10 pads
    torch.testing.assert_close(model(short), model(padded), atol=1e-5, rtol=1e-5)
    _, cache = model.run_with_cache(padded)
    x = cache["blocks.1.hook_resid_post"][0, :6].mean(0)
    by_hand = model.unembed(F.layer_norm(x, (32,), model.ln_final.weight, model.ln_final.bias))
    torch.testing.assert_close(model(padded)[0], by_hand, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scheme", ["rope", "mla", "coca", "relative"])
def test_encoder_fast_ablation_equals_naive(scheme, tiny_cfg):
    model = PEClassifier(tiny_cfg(scheme, "encoder", seed=3)).eval()
    rng = np.random.default_rng(0)
    x = rng.integers(1, 24, (20, 16))
    for i in range(20):
        x[i, rng.integers(3, 17):] = 0
    y = rng.integers(0, 6, 20)
    fast = ablation.per_example(model, x, y, method="fast", batch_size=4)
    naive = ablation.per_example(model, x, y, method="naive", trim=False)
    assert np.array_equal(fast["pred"], naive["pred"])
    np.testing.assert_allclose(fast["loss"], naive["loss"], rtol=1e-5, atol=1e-5)
    assert np.abs(fast["loss"] - fast["clean_loss"][None, None]).max() > 1e-4
