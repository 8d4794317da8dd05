"""The attention path gate: SDPA only where it is the faster path on the device (benchmarks/bench_attention.py)."""
import pytest
import torch

from workbench.model import ModelConfig, PEClassifier, list_schemes
from workbench.model.attention import SDPA_CPU_MIN_WORK

CPU, CUDA = torch.device("cpu"), torch.device("cuda")  # a device object only: no GPU needed


def model(scheme="rope", **kw):
    cfg = dict(vocab_size=24, n_classes=6, scheme=scheme, d_model=32, n_heads=4, d_ff=48, n_layers=2, max_len=48,
               dropout=0.0) | kw
    return PEClassifier(ModelConfig(**cfg)).eval()


def test_cpu_takes_the_explicit_path_below_the_crossover_and_sdpa_above():
    attn = model().blocks[0].attn  # d_head 8
    small, large = SDPA_CPU_MIN_WORK // 8 - 1, SDPA_CPU_MIN_WORK // 8
    assert not attn.fast_path_ok(small, CPU) and attn.fast_path_ok(large, CPU)
    assert attn.fast_path_ok(small, CUDA)  # on CUDA SDPA always pays
    assert not model(use_sdpa=False).blocks[0].attn.fast_path_ok(large, CUDA)  # use_sdpa=False still wins


@pytest.mark.parametrize("scheme", list_schemes())
def test_both_sides_of_the_gate_give_the_explicit_logits(scheme):
    net = model(scheme)
    g = torch.Generator().manual_seed(0)
    for n in (16, 40):  # d_head 8: 128 (explicit on CPU) and 320 (SDPA)
        tokens = torch.randint(1, 24, (3, n), generator=g)
        tokens[1, n // 2:] = 0
        explicit = net.run_with_cache(tokens)[0]  # hooks observe the pattern: always the explicit path
        assert net.blocks[0].attn.fast_path_ok(n, CPU) == (8 * n >= SDPA_CPU_MIN_WORK) or \
            not net.blocks[0].attn.dot_product_scores
        torch.testing.assert_close(net(tokens), explicit, atol=1e-5, rtol=1e-5)
