"""The fast GPU training path (issue 41), on CPU: no mask when nothing is masked and one mask per batch in the
compute dtype, the paper arch's keys / values of all layers in one matmul, the static-shape training step without
host synchronisation, the deadline. Each equals the path it replaces within 1e-6 (fp32)."""
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
    for train in (False, True):  # eval, and train mode at dropout 0 (the training step's path)
        model.train(train)
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


def test_kv_fusion_only_where_every_layer_projects_as_plain_attention(tiny_cfg):
    assert not _model(tiny_cfg, "mla").kv_fusable  # latent projections
    assert not _model(tiny_cfg, "coca").kv_fusable  # keys from the queries
    assert not _model(tiny_cfg, "rope", arch="encoder").kv_fusable  # keys from LN1 of each layer's stream
