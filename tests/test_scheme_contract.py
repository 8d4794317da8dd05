"""The contract every registered positional-encoding scheme keeps (docs/schemes.md, "Adding a scheme"), checked over
the registry, so that a scheme added in one file is tested with no test edited: it documents itself, its weights
come back from the store, its attention scores read its hooks, and it is translation-invariant exactly when it says
so (a bug that makes a relative scheme depend on absolute position fails here)."""
import math
from pathlib import Path

import pytest
import torch

from workbench.model import ModelConfig, PEClassifier
from workbench.model.pe import SCHEMES, list_schemes, register
from workbench.model.pe.base import Scheme

NAMES = list(list_schemes())


def tiny(scheme: str, arch: str = "paper", **kw) -> PEClassifier:
    torch.manual_seed(0)
    return PEClassifier(ModelConfig(vocab_size=24, n_classes=6, arch=arch, scheme=scheme, d_model=32, n_heads=4,
                                    d_ff=48, n_layers=2, max_len=16, dropout=0.0, seed=3, scheme_kwargs=kw)).eval()


def test_every_scheme_documents_itself():
    labels = [cls.label for cls in list_schemes().values()]
    assert len(set(labels)) == len(labels), labels
    doc = (Path(__file__).resolve().parents[1] / "docs" / "schemes.md").read_text()
    for name, cls in list_schemes().items():
        for attr in ("label", "formula", "source", "extrapolation"):
            assert isinstance(getattr(cls, attr, None), str) and getattr(cls, attr).strip(), (name, attr)
        assert cls.acts_on in {"nowhere", "input", "logits", "q,k", "input + q,k"}, name
        assert f"| `{name}` |" in doc, f"docs/schemes.md has no table row for {name}"


@pytest.mark.parametrize("scheme", NAMES)
def test_learned_bias_exactly_when_the_scores_get_a_trained_bias(scheme):
    """`learned_bias` (which keeps a scheme's runs out of packs) is declared exactly where hook_pos_bias carries a
    tensor that needs a gradient."""
    attn = tiny(scheme).blocks[0].attn
    bias = attn.pos_bias(6, 6)
    assert (bias is not None and bias.requires_grad) == list_schemes()[scheme].learned_bias


def test_a_second_scheme_under_a_taken_name_is_refused():
    class Impostor(Scheme):
        name, label = "rope", "not RoPE"

    class RoPE(Scheme):  # the same class name in another module is another class
        name, label = "rope", "not RoPE either"

    for cls in (Impostor, RoPE):
        with pytest.raises(ValueError, match="taken by workbench.model.pe.rope.RoPE"):
            register(cls)
    assert SCHEMES["rope"].label == "RoPE" and SCHEMES["rope"].__module__ == "workbench.model.pe.rope"


@pytest.mark.parametrize("scheme", NAMES)
def test_runs_in_float64(scheme):
    """Every scheme builds its tables in the dtype of the model's parameters: a model in float64 (as analyses that
    need the precision use it) runs, past the training length too, and agrees with float32 to its rounding."""
    model = tiny(scheme)
    tokens = torch.randint(1, 24, (3, 16), generator=torch.Generator().manual_seed(5))
    tokens[1, 9:] = 0
    torch.testing.assert_close(model.double()(tokens).float(), tiny(scheme)(tokens), atol=1e-4, rtol=1e-4)
    if list_schemes()[scheme].can_extrapolate:
        assert torch.isfinite(model(torch.randint(1, 24, (2, 24), generator=torch.Generator().manual_seed(6)))).all()


@pytest.mark.parametrize("scheme", NAMES)
def test_weights_come_back_from_the_store(scheme, tmp_path):
    """Every parameter and persistent buffer is saved and read back (safetensors): the loaded model's logits equal
    the trained model's, after weights are moved off their initial values (a module that rebuilt a tensor at load
    instead of reading it would give the initial model's logits)."""
    from workbench.store import RunStore

    model = tiny(scheme)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    config = {"preset": "smoke", "tag": None, "model": model.cfg.to_dict(),
              "task": {"task": "trigger-distance", "preset": "smoke", "seed": 42, "overrides": {}},
              "train": {"epochs": 1, "seed": 0}}
    run = RunStore(tmp_path / "runs", data_dir=tmp_path / "data").create(config)
    run.save_checkpoint(model.state_dict(), {}, {"epoch": 1, "step": 1})
    tokens = torch.randint(1, 24, (3, 16), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(run.load_model()(tokens), model(tokens), atol=0, rtol=0)
    assert not torch.allclose(tiny(scheme)(tokens), model(tokens))


@pytest.mark.parametrize("scheme", NAMES)
def test_the_scores_read_the_hooked_queries_keys_and_bias(scheme):
    """hook_attn_scores is the scheme's score of what hook_rot_q / hook_rot_k / hook_pos_bias hand on: with hook_rot_q
    scaled by 1.5 and a constant added to hook_pos_bias (where the scheme has one), the cached scores equal
    `attn.scores(1.5 rq, rk) + bias + 0.25` (and differ from the clean ones): a score computed from tensors that
    bypass the hooks fails."""
    model = tiny(scheme)
    tokens = torch.randint(1, 24, (3, 12), generator=torch.Generator().manual_seed(2))
    attn = model.blocks[1].attn
    names = [f"blocks.1.attn.hook_{n}" for n in ("rot_q", "rot_k", "pos_bias", "attn_scores")]
    edits = [(names[0], lambda x, hook: 1.5 * x), (names[2], lambda x, hook: x + 0.25)]
    _, clean = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    with model.hooks(fwd_hooks=edits):  # the edits run first, so the cache holds the edited tensors
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    expected = attn.scores(cache[names[0]], cache[names[1]])
    if names[2] in cache:
        expected = expected + cache[names[2]].unsqueeze(0)
    torch.testing.assert_close(cache[names[3]], expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(cache[names[3]], clean[names[3]], atol=1e-4)
    # the queries alone move the scores, through the hook and through `scores` (a scheme with a position bias
    # would otherwise pass on the bias edit alone)
    with model.hooks(fwd_hooks=edits[:1]):
        _, q_only = model.run_with_cache(tokens, names_filter=lambda n: n == names[3])
    assert not torch.allclose(q_only[names[3]], clean[names[3]], atol=1e-4)
    rq, rk = clean[names[0]], clean[names[1]]
    assert not torch.allclose(attn.scores(2 * rq, rk), attn.scores(rq, rk), atol=1e-4)


def scores_at(model, tokens: torch.Tensor) -> torch.Tensor:
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.0.attn.hook_attn_scores")
    return cache["blocks.0.attn.hook_attn_scores"]


def shift_change(model) -> float:
    """The largest change of the first layer's scores among 10 tokens at positions 0..9 when 4 other tokens come
    first (positions 4..13; no pads, nothing masked)."""
    g = torch.Generator().manual_seed(4)
    body, prefix = torch.randint(1, 24, (2, 10), generator=g), torch.randint(1, 24, (2, 4), generator=g)
    here = scores_at(model, body)
    shifted = scores_at(model, torch.cat([prefix, body], 1))[:, :, 4:, 4:]
    return float((here - shifted).abs().max() / here.abs().max())


@pytest.mark.parametrize("scheme", NAMES)
def test_translation_invariant_exactly_when_declared(scheme):
    """A scheme declaring `translation_invariant` gives the shifted tokens the same first-layer scores among
    themselves (to float rounding); any other scheme (an absolute code on the input, FoPE's frequency mixing)
    changes them."""
    change, declared = shift_change(tiny(scheme)), list_schemes()[scheme].translation_invariant
    assert (change < 1e-5) == declared, f"{scheme}: relative score change under a shift {change:.2e}, " \
                                       f"declared translation_invariant={declared}"
    if not declared:
        assert change > 1e-3, f"{scheme}: {change:.2e} is too close to rounding to call it a change"


def test_fope_departs_from_translation_invariance_through_its_mixing_only():
    """FoPE with sigma = 0 (A = I: RoPE with its low frequencies clipped) is translation-invariant; its default
    sigma = 0.3 mixes frequencies across a plane and is not."""
    assert shift_change(tiny("fope", sigma=0.0)) < 1e-5 < 1e-3 < shift_change(tiny("fope"))


def test_the_contract_sees_an_absolute_position_leak():
    """The check is not vacuous: RoPE whose key rotation also adds the key's absolute position to the score (a
    bug: scores then depend on n, not only on n - m) fails it."""
    model = tiny("rope")
    attn = model.blocks[0].attn
    rotate = attn.rotate

    def leaky(q, k):
        rq, rk = rotate(q, k)
        n = torch.arange(k.shape[1], dtype=k.dtype)[None, :, None, None]
        return rq, rk + 0.1 * n * math.sqrt(k.shape[-1]) / k.shape[-1]

    assert shift_change(model) < 1e-5
    attn.rotate = leaky
    assert shift_change(model) > 1e-3
