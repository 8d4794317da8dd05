"""`ModelConfig`: every architectural choice of a PE-Lab classifier, validated on construction."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

ARCHS = ("paper", "decoder")


@dataclass
class ModelConfig:
    """Architecture of one classifier (SPEC section 2).

    `arch="paper"`: queries from the residual stream, keys/values from the embedded input `M` at every
    layer, bidirectional, masked-mean readout. `arch="decoder"`: pre-LN causal decoder, last-token readout.
    """

    vocab_size: int = 574
    n_classes: int = 72
    arch: str = "paper"
    scheme: str = "rope"
    scheme_kwargs: dict[str, Any] = field(default_factory=dict)
    d_model: int = 256
    n_heads: int = 16
    d_ff: int = 512
    n_layers: int = 6
    max_len: int = 128
    dropout: float = 0.1
    readout_include_pad: bool = False  # the authors' main script averaged over pads too
    use_sdpa: bool = True  # fast path when no hook needs the attention pattern
    seed: int = 0  # seeds parameter init (and fixed random codes of the `random` scheme)
    device: str = "cpu"  # runtime only; TransformerLens utilities read cfg.device

    def __post_init__(self) -> None:
        self.validate()

    # TransformerLens utilities (e.g. patching) read these names.
    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def pads_are_inert(self) -> bool:
        """True when PAD positions never reach the output (masked as keys, left out of the readout), so
        trailing pads can be trimmed from a batch without changing any logit."""
        return not self.readout_include_pad

    @property
    def n_key_value_heads(self) -> None:
        return None

    def validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ValueError(msg)

        need(self.arch in ARCHS, f"arch={self.arch!r} is unknown; use one of {ARCHS}")
        for name in ("vocab_size", "n_classes", "d_model", "n_heads", "d_ff", "n_layers", "max_len"):
            value = getattr(self, name)
            need(isinstance(value, int) and value >= 1, f"{name}={value!r} must be a positive integer")
        need(self.vocab_size >= 2, f"vocab_size={self.vocab_size} must be >= 2 (id 0 is PAD)")
        need(self.d_model % self.n_heads == 0,
             f"n_heads={self.n_heads} must divide d_model={self.d_model}; "
             f"choose n_heads in {[h for h in range(1, self.d_model + 1) if self.d_model % h == 0][:12]}...")
        need(0.0 <= self.dropout < 1.0, f"dropout={self.dropout} must be in [0, 1)")
        need(isinstance(self.scheme_kwargs, dict), "scheme_kwargs must be a dict")
        from .pe import get_scheme  # late import: the registry imports this module

        get_scheme(self.scheme).validate(self)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("device")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config fields {sorted(unknown)}; known fields: {sorted(known)}")
        return cls(**d)

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)
