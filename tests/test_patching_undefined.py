"""Activation patching's zero denominator: effect = mean(LD_patched - LD_clean) / mean(LD_cf - LD_clean) is
undefined (NaN with a `note`), never a divide-by-zero warning or an infinite effect."""
import warnings

import numpy as np
import pytest

from workbench.analysis.patching import SETS, UNDEFINED, UNDEFINED_CI, table_from_pairs


def _res(ld_clean, ld_cf, ld_patched_shift, L=2, H=3):
    """A `per_pair` result: L layers, the position sets, H heads + the stream, N pairs."""
    n = len(ld_clean)
    patched = np.broadcast_to(np.asarray(ld_clean) + np.asarray(ld_patched_shift), (L, len(SETS), H + 1, n)).copy()
    return {"ld_clean": np.asarray(ld_clean, float), "ld_cf": np.asarray(ld_cf, float), "ld_patched": patched}


def test_counterfactual_that_moves_nothing_gives_nan_with_reason():
    clean = np.linspace(-3, 3, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (divide by zero) fails the test
        df = table_from_pairs(_res(clean, clean + 1e-7, 0.5), n_boot=200)
    assert df["effect"].isna().all() and df["ci_lo"].isna().all() and df["ci_hi"].isna().all()
    assert (df["note"] == UNDEFINED).all()


def test_some_resamples_with_zero_denominator_leave_the_interval_undefined():
    clean = np.zeros(20)
    cf = np.zeros(20)
    cf[0] = 2.0  # one pair moves: the mean does, but resamples without pair 0 do not
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = table_from_pairs(_res(clean, cf, np.where(np.arange(20) == 0, 1.0, 0.0)), n_boot=200)
    assert np.allclose(df["effect"], 0.5)  # (1/20) / (2/20)
    assert df["ci_lo"].isna().all() and (df["note"] == UNDEFINED_CI).all()


def test_defined_effect_keeps_interval_and_empty_note():
    rng = np.random.default_rng(0)
    clean = rng.normal(size=64)
    cf = clean + 2.0 + rng.normal(scale=0.1, size=64)
    df = table_from_pairs(_res(clean, cf, 1.0), n_boot=200)
    assert np.allclose(df["effect"], 1.0 / np.mean(cf - clean))
    assert (df["ci_lo"] <= df["effect"]).all() and (df["effect"] <= df["ci_hi"]).all()
    assert (df["note"] == "").all()


@pytest.mark.parametrize("n_boot", [0, 50])
def test_exactly_equal_logits(n_boot):
    clean = np.full(10, 1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = table_from_pairs(_res(clean, clean, 0.0), n_boot=n_boot)
    assert df["effect"].isna().all() and (df["note"] == UNDEFINED).all()


def test_nope_on_task1_is_undefined_end_to_end():
    """The `paper` arch with NoPE is permutation invariant: moving the second trigger changes nothing it sees, so
    LD_cf = LD_clean up to float noise -- the table says so instead of dividing by (almost) zero."""
    from types import SimpleNamespace

    from synthetic_tasks import get_spec
    from workbench.analysis import patching
    from workbench.model import ModelConfig, PEClassifier

    data = SimpleNamespace(spec=get_spec("trigger-distance", preset="smoke"), trigger_ids=np.array([5, 7]))
    model = PEClassifier(ModelConfig(vocab_size=40, n_classes=16, arch="paper", scheme="nope", d_model=32,
                                     n_heads=4, d_ff=48, n_layers=2, max_len=24, dropout=0.0, seed=5)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        df = patching.compute(model, data, n_pairs=24, n_boot=100)
    assert df["effect"].isna().all() and (df["note"] == UNDEFINED).all()
    assert abs(df["ld_cf"].iloc[0] - df["ld_clean"].iloc[0]) < 1e-4
