"""`Scheme`: the interface every positional-encoding scheme implements (one file per scheme)."""
from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from ..attention import Attention


class Scheme:
    """A positional-encoding scheme. Subclasses set the class attributes and override
    `input_pe` (schemes acting on the input) and/or `attention_cls` (schemes acting on q/k or logits).

    `params` maps each scheme_kwargs name to (default, description); unknown kwargs are refused.
    """

    name: ClassVar[str]
    label: ClassVar[str]  # the name in sentences and figure titles ("RoPE")
    acts_on: ClassVar[str]  # "nowhere" | "input" | "logits" | "q,k" | "input + q,k"
    formula: ClassVar[str]
    source: ClassVar[str]
    extrapolation: ClassVar[str]  # what it does at positions beyond the training length
    can_extrapolate: ClassVar[bool] = True
    rotary: ClassVar[bool] = False  # has 2-D rotary planes (initial-angle analysis applies)
    # the first layer's attention scores depend on positions only through k_pos - q_pos, or not at all: the same
    # tokens shifted right give the same scores (tests/test_scheme_contract.py checks it, and that a scheme
    # declaring False does change them)
    translation_invariant: ClassVar[bool] = False
    # its attention adds a trained bias to the scores (`pos_bias` needs a gradient): a pack cannot train it (CPU
    # SDPA under vmap takes no mask that needs one), so such runs train alone (`train.packed.unpackable`); tested
    learned_bias: ClassVar[bool] = False
    params: ClassVar[dict[str, tuple[Any, str]]] = {}
    # train-section fields the scheme needs to train stably, {field: (value, why)}: applied after the preset's
    # train section and before its per-task / per-scheme rules, the fidelity and --set (all of which win); stored
    # in config.json like any field. Empty for every scheme whose training the presets' optimiser suits.
    train_defaults: ClassVar[dict[str, tuple[Any, str]]] = {}
    attention_cls: ClassVar[type[Attention]] = Attention

    def __init__(self, cfg):
        self.cfg = cfg
        unknown = set(cfg.scheme_kwargs) - set(self.params)
        if unknown:
            allowed = sorted(self.params) or "none"
            raise ValueError(f"scheme {self.name!r} got unknown scheme_kwargs {sorted(unknown)}; allowed: {allowed}")
        self.kw = {k: v for k, (v, _) in self.params.items()} | dict(cfg.scheme_kwargs)
        self.check()

    @classmethod
    def validate(cls, cfg) -> None:
        cls(cfg)

    def check(self) -> None:
        """Scheme-specific validation of `self.cfg` and `self.kw`; raise ValueError saying what to change."""

    def input_pe(self) -> nn.Module | None:
        """A module mapping `n_pos` to `[n_pos, d_model]`, added to the token embeddings, or None."""
        return None

    def attention(self, layer: int) -> Attention:
        return self.attention_cls(self.cfg, layer, self)


class FixedInputPE(nn.Module):
    """An input PE given by a deterministic function of (n_pos, d_model); cached per length."""

    def __init__(self, table_fn, d_model: int):
        super().__init__()
        self.table_fn, self.d_model = table_fn, d_model
        self._cache: dict[int, torch.Tensor] = {}

    def forward(self, n_pos: int) -> torch.Tensor:
        if n_pos not in self._cache:
            self._cache[n_pos] = torch.as_tensor(self.table_fn(n_pos, self.d_model), dtype=torch.float32)
        return self._cache[n_pos]


def need(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def need_base(scheme: str, base) -> None:
    """A frequency base (rotary: theta_i = base^(-2i/d); sinusoidal alike) must be a number > 1."""
    need(isinstance(base, (int, float)) and not isinstance(base, bool) and base > 1,
         f"{scheme} base={base!r} must be a number > 1 (frequencies base^(-2i/d); the papers use 10000)")
