"""`ModelConfig`: every architectural choice of a PE-Lab classifier, validated on construction."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

ARCHS = ("paper", "encoder", "decoder")
ACTIVATIONS = ("auto", "relu", "gelu")
FINAL_LN = ("after_pool", "before_pool", "none")
DROPOUT_SITES = ("attn_weights", "attn_out", "mlp_hidden", "mlp_out")
# Fields added after the first runs were stored, with the default that reproduces those runs. The run store
# leaves a field out of the config hash while it holds this value, so existing run ids stay valid.
LATER_DEFAULTS: dict[str, Any] = {"attn_pad_mask": True, "pad_trained": False, "final_ln": "after_pool",
                                  "unembed_vocab": False, "activation": "auto",
                                  "dropout_sites": ["attn_weights", "attn_out", "mlp_out"], "attn_bias": True}


@dataclass
class ModelConfig:
    """Architecture of one classifier (SPEC section 2).

    `arch="paper"`: queries from the residual stream, keys/values from the embedded input `M` at every
    layer, bidirectional, masked-mean readout. `arch="encoder"`: standard pre-LN bidirectional encoder (keys and
    values from LN1 of the same layer), masked-mean readout. `arch="decoder"`: pre-LN causal decoder, last-token
    readout. The fields after `dropout` reproduce the authors' released code when changed from their defaults
    (docs/fidelity.md; `workbench train --fidelity authors` sets them together).
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
    readout_include_pad: bool = False  # True: mean over all positions, pads included (authors' transformer script)
    attn_pad_mask: bool = True  # False: PAD keys are attended like words (authors' transformer script)
    pad_trained: bool = False  # True: PAD (id 0) is an ordinary trained embedding, no padding_idx (authors)
    final_ln: str = "after_pool"  # "none": no final LayerNorm (authors' transformer script); "before_pool": LN
    # on every position, then the pooling (authors' MLA script); "after_pool": LN of the pooled vector
    unembed_vocab: bool = False  # True: the output layer has vocab_size outputs, not n_classes (authors)
    activation: str = "auto"  # FFN: "relu" | "gelu" | "auto" (relu in the paper arch, gelu otherwise)
    dropout_sites: list[str] = field(default_factory=lambda: ["attn_weights", "attn_out", "mlp_out"])
    attn_bias: bool = True  # False: no biases in the attention projections (authors' MLA script)
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
    def n_key_value_heads(self) -> None:
        return None

    @property
    def n_outputs(self) -> int:
        """Width of the output layer: n_classes, or vocab_size with `unembed_vocab` (labels index into it)."""
        return self.vocab_size if self.unembed_vocab else self.n_classes

    @property
    def ffn_activation(self) -> str:
        return ("relu" if self.arch == "paper" else "gelu") if self.activation == "auto" else self.activation

    @property
    def pads_are_inert(self) -> bool:
        """True iff PAD positions cannot change the output: masked out of attention AND left out of the readout
        (the causal decoder reads the last real token, and right pads come after it). Only then may a batch be
        cut to its longest real length (length-grouped batching, ablation's trimming)."""
        return self.arch == "decoder" or (self.attn_pad_mask and not self.readout_include_pad)

    def dropout_at(self, site: str) -> float:
        """The dropout probability at `site` (one of DROPOUT_SITES): `dropout` if listed in dropout_sites, else 0."""
        return self.dropout if site in self.dropout_sites else 0.0

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
        for name in ("readout_include_pad", "attn_pad_mask", "pad_trained", "unembed_vocab", "attn_bias"):
            need(isinstance(getattr(self, name), bool), f"{name}={getattr(self, name)!r} must be true or false")
        need(self.final_ln in FINAL_LN, f"final_ln={self.final_ln!r} is unknown; use one of {FINAL_LN}")
        need(self.activation in ACTIVATIONS, f"activation={self.activation!r} is unknown; use one of {ACTIVATIONS}")
        need(isinstance(self.dropout_sites, (list, tuple)) and set(self.dropout_sites) <= set(DROPOUT_SITES),
             f"dropout_sites={self.dropout_sites!r}: each entry must be one of {DROPOUT_SITES}")
        self.dropout_sites = list(self.dropout_sites)
        need(not (self.arch == "decoder" and self.readout_include_pad),
             "readout_include_pad=True needs a mean readout, but arch='decoder' reads the last real token; "
             "use arch='paper' or 'encoder', or readout_include_pad=False")
        need(not self.unembed_vocab or self.n_classes <= self.vocab_size,
             f"unembed_vocab=True gives vocab_size={self.vocab_size} outputs, fewer than n_classes={self.n_classes}; "
             "set unembed_vocab=False")
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
