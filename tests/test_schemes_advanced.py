"""The advanced schemes (mla, coca, fope, tapa, wavelet, legendre) and `workbench schemes`: tests that fail if
the maths is wrong."""
import math

import numpy as np
import pytest
import torch

from workbench.model import PEClassifier
from workbench.model.pe import list_schemes

NEW = ["mla", "coca", "fope", "tapa", "wavelet", "legendre"]
VARIANTS = [("coca", {"strict": True}), ("tapa", {"phase": "linear"}), ("fope", {"trainable": True, "clip": False}),
            ("mla", {"d_c": 8, "d_cq": 12, "d_rope": 2}), ("legendre", {"norm": "none", "gamma": 2.0}),
            ("wavelet", {"scale": 1.0}), ("coca", {"score": "released"}), ("fope", {"construction": "official"}),
            ("mla", {"shared_rope_q": True, "rope_read": "authors", "d_rope": 8, "score_scale_dim": 16})]


def model_for(cfg):
    torch.manual_seed(0)
    return PEClassifier(cfg).eval()


def rotate_reference(x: torch.Tensor, pos: int, base: float = 10000.0) -> torch.Tensor:
    """Block-diagonal rotation matrix R(pos) applied to the last dim of x (interleaved planes), in float64."""
    d = x.shape[-1]
    R = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        a = pos * base ** (-2 * i / d)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return x.double() @ R.T


def is_toeplitz(m: torch.Tensor, atol=1e-5) -> bool:
    return all(torch.allclose(m[..., i, j], m[..., i + 1, j + 1], atol=atol)
               for i in range(m.shape[-2] - 1) for j in range(m.shape[-1] - 1))


# ---- every new scheme (and its options), both architectures -----------------------------------------------
@pytest.mark.parametrize("arch", ["paper", "decoder"])
@pytest.mark.parametrize("scheme, kw", [(s, {}) for s in NEW] + VARIANTS)
def test_train_step_and_explicit_path_match(scheme, kw, arch, tiny_cfg, tokens):
    model = PEClassifier(tiny_cfg(scheme, arch, scheme_kwargs=kw))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    loss = model.loss(tokens, torch.arange(5) % 6)
    loss.backward()
    for n, p in model.named_parameters():
        if p.requires_grad and n.startswith("blocks.0.attn."):
            assert p.grad is not None and torch.isfinite(p.grad).all(), n
    opt.step()
    assert torch.isfinite(loss)
    changed = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    specific = {"mla": "W_DQ", "coca": "W_T", "fope": "W_Q", "tapa": "W_Q", "wavelet": "W_Q", "legendre": "W_Q"}
    assert f"blocks.0.attn.{specific[scheme]}" in changed
    if scheme == "fope":  # frozen unless trainable
        assert ("blocks.0.attn.cos_coef" in changed) == bool(kw.get("trainable"))
    model.eval()
    fast = model(tokens)
    explicit, cache = model.run_with_cache(tokens)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    assert cache["blocks.1.attn.hook_z"].shape == (5, 16, 4, 8)
    assert cache["blocks.0.attn.hook_pattern"].shape == (5, 4, 16, 16)
    assert model.blocks[0].attn.W_O.shape == (4, 8, 32)
    # runs past the training length (max_len 16) with finite outputs
    assert torch.isfinite(model(torch.randint(1, 24, (2, 24), generator=torch.Generator().manual_seed(1)))).all()


def test_new_schemes_are_registered_with_their_documentation():
    import sys

    reg = list_schemes()
    for name in NEW:
        cls = reg[name]
        for attr in ("formula", "source", "extrapolation"):
            assert isinstance(getattr(cls, attr), str) and len(getattr(cls, attr)) > 20, (name, attr)
        doc = sys.modules[cls.__module__].__doc__
        assert doc and "seed 00" in doc and "Beyond the training length:" in doc, name
        assert cls.can_extrapolate
    assert {"rope", "rope+sinusoidal", "mla", "coca", "fope"} <= {n for n, c in reg.items() if c.rotary}
    assert not {"tapa", "wavelet", "legendre"} & {n for n, c in reg.items() if c.rotary}
    assert reg["tapa"].acts_on == "logits" and reg["wavelet"].acts_on == reg["legendre"].acts_on == "input"


@pytest.mark.parametrize("scheme, hook", [
    ("coca", "hook_t"), ("coca", "hook_k"), ("coca", "hook_rot_k"), ("coca", "hook_rot_q"), ("coca", "hook_q"),
    ("mla", "hook_q_latent"), ("mla", "hook_kv_latent"), ("mla", "hook_rot_k"), ("fope", "hook_rot_q"),
    ("tapa", "hook_rot_k"), ("tapa", "hook_q"),
])
def test_scheme_hooks_sit_on_the_computation_path(scheme, hook, tiny_cfg, tokens):
    model = model_for(tiny_cfg(scheme))
    clean = model(tokens)
    edited = model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.0.attn.{hook}", lambda x, hook: x * 1.5 + 0.1)])
    assert not torch.allclose(clean, edited, atol=1e-5), hook


@pytest.mark.parametrize("scheme, hook", [("coca", "hook_t"), ("mla", "hook_kv_latent")])
def test_nnsight_reads_the_scheme_hooks(scheme, hook, tiny_cfg, tokens):
    from nnsight import NNsight

    model = model_for(tiny_cfg(scheme))
    logits, cache = model.run_with_cache(tokens)
    wrapped = NNsight(model)
    with wrapped.trace(tokens):  # no pattern observer: CoCA takes its SDPA form, MLA the base fast path
        x = getattr(wrapped.blocks[1].attn, hook).output.save()
        out = wrapped.output.save()
    torch.testing.assert_close(x, cache[f"blocks.1.attn.{hook}"])
    torch.testing.assert_close(out, logits, atol=1e-5, rtol=1e-5)


# ---- CoCA -------------------------------------------------------------------------------------------------
def coca_explicit_scores(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Materialise k_{m,n} = c_n * q_m, rotate q_m by m and k_{m,n} by n, dot product / sqrt(d)."""
    b, n, h, d = q.shape
    out = torch.zeros(b, h, n, n, dtype=torch.float64)
    for m in range(n):
        rq = rotate_reference(q[:, m], m)  # [b, h, d]
        for j in range(n):
            k_mj = c[:, j] * q[:, m]  # collinear with the query of position m
            out[:, :, m, j] = (rq * rotate_reference(k_mj, j)).sum(-1) / math.sqrt(d)
    return out


@pytest.mark.parametrize("strict", [False, True])
def test_coca_efficient_score_equals_explicit_construction(strict, tiny_cfg):
    attn = model_for(tiny_cfg("coca", scheme_kwargs={"strict": strict})).blocks[0].attn
    g = torch.Generator().manual_seed(2)
    x_q, x_kv = torch.randn(2, 7, 32, generator=g), torch.randn(2, 7, 32, generator=g)
    q, c, _ = attn.project(x_q, x_kv)
    assert (c >= 0).all() and torch.equal(c[..., 0::2], c[..., 1::2]) and (c > 0).any() and (c == 0).any()
    assert torch.equal(q[..., 0::2], q[..., 1::2]) == strict  # strict ties the query within each plane
    fast = attn.scores(*attn.rotate(q, c))
    torch.testing.assert_close(fast.double(), coca_explicit_scores(q, c), atol=1e-5, rtol=1e-4)
    # and the closed form: sum_j c_{n,j} |q_{m,j}|^2 cos((m-n) theta_j) / sqrt(d)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    sq = (q[..., 0::2] ** 2 + q[..., 1::2] ** 2).double()
    rel = torch.arange(7.)[:, None] - torch.arange(7.)[None, :]
    closed = torch.einsum("bmhj,bnhj,mnj->bhmn", sq, c[..., 0::2].double(),
                          torch.cos(rel[..., None].double() * theta)) / math.sqrt(8)
    torch.testing.assert_close(fast.double(), closed, atol=1e-5, rtol=1e-4)


def plane_cosines(q: torch.Tensor, k: torch.Tensor):
    """Cosine of the angle between q and k in every 2-D plane, where both are non-zero."""
    qp, kp = q.unflatten(-1, (-1, 2)), k.unflatten(-1, (-1, 2))
    nq, nk = qp.norm(dim=-1), kp.norm(dim=-1)
    ok = (nq > 1e-6) & (nk > 1e-6)
    return ((qp * kp).sum(-1) / (nq * nk).clamp(min=1e-12))[ok]


@pytest.mark.parametrize("arch", ["paper", "decoder"])
def test_coca_initial_angle_is_zero_in_every_plane(arch, tiny_cfg, tokens):
    from workbench.model.pe.coca import pair_keys

    model = model_for(tiny_cfg("coca", arch))
    _, cache = model.run_with_cache(tokens)
    assert model.blocks[0].attn.collinear
    for layer in range(2):
        q, c = cache[f"blocks.{layer}.attn.hook_q"], cache[f"blocks.{layer}.attn.hook_k"]
        cos = plane_cosines(q[:, :, None].expand(-1, -1, 16, -1, -1), pair_keys(q, c))
        assert cos.numel() > 1000
        torch.testing.assert_close(cos, torch.ones_like(cos), atol=1e-5, rtol=0)
    # the same measurement on RoPE finds non-zero angles, so the check has teeth
    _, rc = model_for(tiny_cfg("rope", arch)).run_with_cache(tokens)
    q, k = rc["blocks.0.attn.hook_q"], rc["blocks.0.attn.hook_k"]
    assert plane_cosines(q[:, :, None].expand(-1, -1, 16, -1, -1), k[:, None].expand(-1, 16, -1, -1, -1)).min() < 0.5


def test_coca_score_is_relative_and_nonnegatively_weighted(tiny_cfg):
    attn = model_for(tiny_cfg("coca")).blocks[0].attn
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 1, 4, 8, generator=g).expand(1, 12, 4, 8)  # same query and t everywhere
    c = torch.rand(1, 1, 4, 8, generator=g).expand(1, 12, 4, 8)
    c = (c[..., 0::2]).repeat_interleave(2, -1)
    s = attn.scores(*attn.rotate(q, c))[0]
    assert is_toeplitz(s)
    assert (s.diagonal(dim1=-2, dim2=-1)[..., None] >= s - 1e-6).all()  # offset 0 is the maximum: every weight is >= 0


# ---- MLA --------------------------------------------------------------------------------------------------
def test_mla_shapes_latents_and_shared_rotary_key(tiny_cfg, tokens):
    model = model_for(tiny_cfg("mla"))
    attn = model.blocks[0].attn
    assert (attn.d_c, attn.d_cq, attn.d_rope) == (16, 16, 4)  # default 128 clamped to d_model // 2; d_head // 2
    _, cache = model.run_with_cache(tokens)
    assert cache["blocks.0.attn.hook_q_latent"].shape == (5, 16, 16)
    assert cache["blocks.1.attn.hook_kv_latent"].shape == (5, 16, 16)
    k, rk = cache["blocks.0.attn.hook_k"], cache["blocks.0.attn.hook_rot_k"]
    q, rq = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_rot_q"]
    assert k.shape == rk.shape == q.shape == (5, 16, 4, 8 + 4)
    for t in (k, rk):  # one rotary key shared by all heads
        assert torch.equal(t[..., 8:], t[..., :1, 8:].expand_as(t[..., 8:]))
    assert not torch.allclose(k[:, :, 0, :8], k[:, :, 1, :8])  # content keys differ per head
    # content dims untouched; rotary dims truly rotated (norm kept, direction changed past position 0)
    assert torch.equal(rk[..., :8], k[..., :8]) and torch.equal(rq[..., :8], q[..., :8])
    torch.testing.assert_close(rk[..., 8:].norm(dim=-1), k[..., 8:].norm(dim=-1))
    torch.testing.assert_close(rq[..., 8:].norm(dim=-1), q[..., 8:].norm(dim=-1))
    for p in (0, 5, 15):
        torch.testing.assert_close(rk[:, p, :, 8:].double(), rotate_reference(k[:, p, :, 8:], p), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(rk[:, 5:, :, 8:], k[:, 5:, :, 8:])
    # the scores are the dot product of the concatenated parts / sqrt(d_head + d_rope)
    expect = torch.einsum("bqhe,bkhe->bhqk", rq, rk) / math.sqrt(12) + model.mask(tokens)
    torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"], expect, atol=1e-5, rtol=1e-5)


def test_mla_rotary_scores_depend_on_relative_position_only(tiny_cfg):
    attn = model_for(tiny_cfg("mla", scheme_kwargs={"d_rope": 6})).blocks[0].attn
    g = torch.Generator().manual_seed(4)
    qv, kv = torch.randn(4, 8 + 6, generator=g), torch.randn(4, 8 + 6, generator=g)
    q, k = qv.expand(1, 12, 4, 14).clone(), kv.expand(1, 12, 4, 14).clone()
    rq, rk = attn.rotate(q, k)
    s = torch.einsum("bqhe,bkhe->bhqk", rq[..., 8:], rk[..., 8:])[0]  # rotary part only
    assert is_toeplitz(s)  # (m, n) and (m + s, n + s) give the same score
    assert not torch.allclose(s[:, 0, 0], s[:, 0, 5])  # but it does depend on the offset


def test_mla_latent_hooks_feed_the_projections(tiny_cfg, tokens):
    model = model_for(tiny_cfg("mla", "decoder", scheme_kwargs={"d_c": 8}))
    attn = model.blocks[1].attn
    _, cache = model.run_with_cache(tokens)
    c_kv = cache["blocks.1.attn.hook_kv_latent"]
    assert c_kv.shape == (5, 16, 8)
    torch.testing.assert_close(cache["blocks.1.attn.hook_v"], torch.einsum("bpc,hce->bphe", c_kv, attn.W_UV))
    torch.testing.assert_close(cache["blocks.1.attn.hook_k"][..., :8], torch.einsum("bpc,hce->bphe", c_kv, attn.W_UK))


# ---- FoPE -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch, rope_kw", [("paper", {}), ("decoder", {}),
                                           ("paper", {"rotary_fraction": 0.5, "rope_heads": 1})])
def test_fope_without_noise_or_clipping_is_rope(arch, rope_kw, tiny_cfg, tokens):
    rope = model_for(tiny_cfg("rope", arch, scheme_kwargs=rope_kw))
    fope = model_for(tiny_cfg("fope", arch, scheme_kwargs={"sigma": 0.0, "clip": False} | rope_kw))
    fs, rs = fope.state_dict(), rope.state_dict()
    assert set(fs) - set(rs) == {f"blocks.{l}.attn.{c}_coef" for l in range(2) for c in ("cos", "sin")}
    for name, value in rs.items():  # same seed -> the same weights (FoPE draws its noise from its own generator)
        assert torch.equal(value, fs[name]), name
    torch.testing.assert_close(fope(tokens), rope(tokens), atol=1e-6, rtol=1e-6)
    _, cf = fope.run_with_cache(tokens)
    _, cr = rope.run_with_cache(tokens)
    torch.testing.assert_close(cf["blocks.1.attn.hook_rot_q"], cr["blocks.1.attn.hook_rot_q"], atol=1e-6, rtol=1e-6)


def test_fope_clipping_freezes_low_frequencies(tiny_cfg):
    # d_head 8: theta = 1, 0.1, 0.01, 0.001; floor 2 pi / 16 = 0.39 -> planes 1..3 clipped
    attn = model_for(tiny_cfg("fope")).blocks[0].attn
    assert attn.clipped.tolist() == [False, True, True, True]
    q = torch.randn(2, 16, 4, 8)
    rq, _ = attn.rotate(q, q)
    assert torch.equal(rq[..., 2:], q[..., 2:])  # zero frequency: never rotated, at any position
    assert not torch.allclose(rq[:, 1:, :, :2], q[:, 1:, :, :2])
    far, _ = attn.rotate(torch.randn(1, 200, 4, 8).expand(1, 200, 4, 8), torch.zeros(1, 200, 4, 8))
    assert far.shape == (1, 200, 4, 8)
    unclipped = model_for(tiny_cfg("fope", scheme_kwargs={"clip": False})).blocks[0].attn
    assert not unclipped.clipped.any()
    rq2, _ = unclipped.rotate(q, q)
    assert not torch.allclose(rq2[:, 1:, :, 2:4], q[:, 1:, :, 2:4])


def test_fope_is_a_fourier_series_per_head(tiny_cfg):
    attn = model_for(tiny_cfg("fope", scheme_kwargs={"sigma": 0.3, "clip": False})).blocks[0].attn
    assert not attn.cos_coef.requires_grad and attn.cos_coef.shape == (4, 4, 4)
    noise = attn.cos_coef - torch.eye(4)
    assert 0.1 < noise.std() < 0.6 and not torch.allclose(attn.cos_coef[0], attn.cos_coef[1])
    C, S = attn.cos_sin(10, torch.float32)  # [pos, head, d_head]
    p, h, j = 7, 2, 1
    w = attn.inv_freq
    want_c = (torch.cos(p * w) * attn.cos_coef[h, :, j]).sum().item()
    want_s = (torch.sin(p * w) * attn.sin_coef[h, :, j]).sum().item()
    assert C[p, h, 2 * j].item() == pytest.approx(want_c, abs=1e-5)
    assert C[p, h, 2 * j + 1].item() == C[p, h, 2 * j].item()  # one pair of functions per plane
    assert S[p, h, 2 * j + 1].item() == pytest.approx(want_s, abs=1e-5)


# ---- TAPA -------------------------------------------------------------------------------------------------
def test_tapa_zero_phase_is_scaled_dot_product_of_amplitudes(tiny_cfg):
    attn = model_for(tiny_cfg("tapa")).blocks[0].attn
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 9, 4, 8, generator=g), torch.randn(2, 9, 4, 8, generator=g)
    q0, k0 = q.clone(), k.clone()
    q0[..., 4:], k0[..., 4:] = 0, 0
    expect = torch.einsum("bqhe,bkhe->bhqk", q[..., :4], k[..., :4]) / 2.0
    torch.testing.assert_close(attn.scores(q0, k0), expect)
    # with a phase: the paper's formula entry by entry
    s = attn.scores(q, k)
    for (m, n) in ((0, 0), (2, 7), (8, 1)):
        amp = (q[1, m, 3, :4] * k[1, n, 3, :4]).sum() / 2.0
        ph = (q[1, m, 3, 4:] * k[1, n, 3, 4:]).sum() / 2.0
        want = amp * torch.cos(2 * math.pi * abs(m - n) ** 0.1 * ph)
        assert s[1, 3, m, n].item() == pytest.approx(want.item(), abs=1e-5)
    assert not torch.allclose(s, torch.einsum("bqhe,bkhe->bhqk", q[..., :4], k[..., :4]) / 2.0)


def test_tapa_linear_phase(tiny_cfg, tokens):
    attn = model_for(tiny_cfg("tapa", scheme_kwargs={"phase": "linear"})).blocks[0].attn
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 6, 4, 8, generator=g), torch.randn(1, 6, 4, 8, generator=g)
    s = attn.scores(q, k)
    m, n, h = 4, 1, 2
    ph = (q[0, m, h, 4:].sum() + k[0, n, h, 4:].sum()) / 2.0
    want = (q[0, m, h, :4] * k[0, n, h, :4]).sum() / 2.0 * torch.cos(2 * math.pi * 3 ** 0.1 * ph)
    assert s[0, h, m, n].item() == pytest.approx(want.item(), abs=1e-5)
    quad = model_for(tiny_cfg("tapa")).blocks[0].attn
    assert not torch.allclose(s, quad.scores(q, k))


# ---- input tables -----------------------------------------------------------------------------------------
def test_wavelet_table_is_finite_deterministic_and_multiscale():
    import pywt

    from workbench.model.pe.wavelet import wavelet_layout, wavelet_raw, wavelet_table

    t = wavelet_table(16, 32, 16)
    assert t.shape == (16, 32) and np.isfinite(t).all()
    assert np.array_equal(t, wavelet_table(16, 32, 16))
    np.testing.assert_allclose(wavelet_table(40, 32, 16)[:16], t)  # a fixed function of the position
    np.testing.assert_allclose(np.linalg.norm(t, axis=1), math.sqrt(32))
    assert min(np.linalg.norm(t[i] - t[j]) for i in range(16) for j in range(i)) > 0.1  # positions distinct
    layout = wavelet_layout(32, 16)
    assert {j for _, j, _ in layout} == set(range(5)) and {k for k, _, _ in layout} == {"phi", "psi"}  # J = 4
    # one column against an independent evaluation of the dilated, shifted db4 function
    phi, psi, x = pywt.Wavelet("db4").wavefun(level=8)
    col = next(i for i, (k, j, _) in enumerate(layout) if k == "psi" and j == 2)
    _, j, c = layout[col]
    mu = np.trapezoid(x * psi ** 2, x) / np.trapezoid(psi ** 2, x)
    ref = 2 ** (-j / 2) * np.interp((np.arange(16) - c) / 2 ** j + mu, x, psi, left=0, right=0)
    np.testing.assert_allclose(wavelet_raw(16, 32, 16)[:, col], ref, atol=2e-2)
    # beyond the training length: still a code for a while, then nothing at all
    far = wavelet_table(16 * 60, 32, 16)
    assert np.linalg.norm(far[20]) > 1 and np.allclose(far[-1], 0)


def test_legendre_table_matches_numpy_and_normalises():
    from numpy.polynomial import legendre as npleg

    from workbench.model.pe.legendre import legendre_table, legendre_values

    xs = np.array([-0.9, -0.3, 0.0, 0.41, 0.77, 1.0])
    vals = legendre_values(xs, 40)
    for l in (0, 1, 2, 7, 39):
        np.testing.assert_allclose(vals[:, l], npleg.legval(xs, np.eye(40)[l]), atol=1e-10)
    raw = legendre_table(16, 32, 16, norm="none")
    np.testing.assert_allclose(raw[5], npleg.legval(np.tanh(5 / 16), np.eye(32)), atol=1e-10)
    t = legendre_table(16, 32, 16)
    assert np.isfinite(t).all() and np.array_equal(t, legendre_table(16, 32, 16))
    np.testing.assert_allclose(np.sqrt((t ** 2).mean(0)), 1.0)  # every degree has RMS 1 in training
    np.testing.assert_allclose(legendre_table(50, 32, 16)[:16], t)
    far = legendre_table(2000, 32, 16, norm="none")[-1]
    np.testing.assert_allclose(far, 1.0, atol=1e-6)  # tanh saturates: P_l(1) = 1, positions collapse


def test_input_schemes_add_their_table(tiny_cfg, tokens):
    from workbench.model.pe.legendre import legendre_table
    from workbench.model.pe.wavelet import wavelet_table

    for scheme, table in (("wavelet", wavelet_table(16, 32, 16)), ("legendre", legendre_table(16, 32, 16))):
        model = model_for(tiny_cfg(scheme))
        _, cache = model.run_with_cache(tokens)
        torch.testing.assert_close(cache["hook_pos_embed"][0], torch.tensor(table, dtype=torch.float32))


# ---- bad configs --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, words", [
    (dict(scheme="coca", d_model=36), "even d_head"),
    (dict(scheme="fope", d_model=36), "even d_head"),
    (dict(scheme="coca", scheme_kwargs={"strict": "yes"}), "strict"),
    (dict(scheme="mla", scheme_kwargs={"d_c": 64}), "d_c=64"),
    (dict(scheme="mla", scheme_kwargs={"d_rope": 3}), "d_rope=3"),
    (dict(scheme="mla", scheme_kwargs={"d_cq": 0}), "d_cq"),
    (dict(scheme="fope", scheme_kwargs={"sigma": -1.0}), "sigma"),
    (dict(scheme="fope", scheme_kwargs={"rope_heads": 7}), "rope_heads"),
    (dict(scheme="tapa", scheme_kwargs={"theta": 0.3}), "whole number"),
    (dict(scheme="tapa", scheme_kwargs={"phase": "cubic"}), "phase"),
    (dict(scheme="tapa", scheme_kwargs={"alpha": 0}), "alpha"),
    (dict(scheme="wavelet", scheme_kwargs={"scale": -2}), "scale"),
    (dict(scheme="legendre", scheme_kwargs={"norm": "l2"}), "norm"),
    (dict(scheme="legendre", scheme_kwargs={"degree": 3}), "unknown scheme_kwargs"),
])
def test_bad_configs_say_what_to_change(kw, words, tiny_cfg):
    with pytest.raises(ValueError, match=words):
        tiny_cfg(**kw)


def test_mla_accepts_odd_d_head_through_its_own_rotary_width(tiny_cfg):
    cfg = tiny_cfg("mla", d_model=36)  # d_head 9: content dims need no pairs; d_rope = 4
    assert model_for(cfg).blocks[0].attn.d_rope == 4


# ---- CLI ----------------------------------------------------------------------------------------------------
def test_cli_schemes_lists_every_registered_scheme():
    import json

    import typer
    from typer.testing import CliRunner

    from workbench.cli import app

    # typer collapses a one-command app into that command; once other groups exist `schemes` is a subcommand
    prefix = ["schemes"] if hasattr(typer.main.get_command(app), "list_commands") else []
    runner = CliRunner()
    result = runner.invoke(app, prefix)
    assert result.exit_code == 0, result.output
    names = list(list_schemes())  # the registry's order; the fifteen of today among them
    assert {"nope", "sinusoidal", "learned", "random", "relative", "t5", "alibi", "rope", "rope+sinusoidal",
            "mla", "coca", "fope", "tapa", "wavelet", "legendre"} <= set(names)
    for n in names:
        assert f"│ {n} " in result.output, n
    assert f"({len(names)})" in result.output and "d_c=128" in result.output and "cannot" in result.output
    rows = json.loads(runner.invoke(app, prefix + ["--json"]).output)
    assert [r["name"] for r in rows] == names
    assert rows[names.index("fope")]["params"]["sigma"]["default"] == 0.3
    one = runner.invoke(app, prefix + ["tapa"])
    assert one.exit_code == 0 and "alpha = 0.1" in one.output and "│ rope " not in one.output
    assert runner.invoke(app, prefix + ["nosuch"]).exit_code != 0
