"""Issue 14: resample ablation, counterfactual pairs, activation patching (nnsight), probes, trigger attention,
direct logit attribution and the head summary, on tiny untrained models and smoke-sized data."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from synthetic_tasks import generate, get_spec
from synthetic_tasks.counterfactual import counterfactual_pairs
from workbench.analysis import ablation
from workbench.model import ModelConfig, PEClassifier

from test_analysis import make_data, make_model


# ---- resample ablation -----------------------------------------------------------------------------
def test_resample_partners_share_length_and_differ():
    x = make_data(40, min_len=12).test_x
    partner = ablation.resample_partners(x, seed=1)
    n = ablation.lengths(x)
    has = partner >= 0
    assert has.sum() >= 10
    assert (partner[has] != np.flatnonzero(has)).all() and (n[partner[has]] == n[has]).all()
    singles = [i for i in range(len(x)) if (n == n[i]).sum() == 1]
    assert all(partner[i] == -1 for i in singles)


@pytest.mark.parametrize("scheme, arch", [("rope", "paper"), ("alibi", "decoder"), ("mla", "paper")])
def test_resample_fast_equals_naive_loop(scheme, arch):
    model = make_model(scheme, arch=arch, n_layers=3)
    d = make_data(40, min_len=13)
    d.test_x[0, 3:] = 0  # the one example of length 3: no partner, left out
    fast = ablation.per_example(model, d.test_x, d.test_y, mode="resample", method="fast", batch_size=5, seed=2)
    naive = ablation.per_example(model, d.test_x, d.test_y, mode="resample", method="naive", trim=False, seed=2)
    assert np.array_equal(fast["kept"], naive["kept"]) and 0 not in fast["kept"] and len(fast["kept"]) == len(d.test_x) - 1
    assert np.array_equal(fast["pred"], naive["pred"])
    np.testing.assert_allclose(fast["loss"], naive["loss"], rtol=1e-5, atol=1e-5)
    assert np.abs(fast["loss"] - fast["clean_loss"][None, None]).max() > 1e-4


def test_resample_replaces_z_with_the_partner_z():
    """Hand check of one head: the ablated logits equal a forward whose hook_z slice is the partner's."""
    model = make_model("rope")
    x = np.array([[3, 4, 5, 0], [6, 7, 8, 0], [9, 10, 11, 12]])
    y = np.array([1, 2, 3])
    res = ablation.per_example(model, x, y, mode="resample", method="fast", batch_size=8)
    assert list(res["kept"]) == [0, 1]
    tok = torch.as_tensor(x[:2, :3])
    zp = ablation.partner_z(model, tok.flip(0))

    def patch(z, hook):
        z = z.clone()
        z[:, :, 1] = zp[0][:, :, 1]
        return z

    logits = model.run_with_hooks(tok, fwd_hooks=[("blocks.0.attn.hook_z", patch)])
    loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y[:2]), reduction="none")
    np.testing.assert_allclose(res["loss"][0, 1], loss.detach().numpy(), rtol=1e-5, atol=1e-6)
