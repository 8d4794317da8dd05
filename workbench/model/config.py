"""`ModelConfig`: every architectural choice of a PE-Lab classifier, validated on construction.

`check_fields` is the one type/range validator for config sections: it reads the JSON type each value must have
from the dataclass field annotations (int, float, bool, str, dict, list[float], `X | None`) and the allowed range
from a small table, so a new field is type-checked without more code (add it to the table to bound it).
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
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


@dataclass(frozen=True)
class Range:
    """Allowed numeric values [lo, hi] (an open end when `lo_open` / `hi_open`)."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, v: float) -> bool:
        return (self.lo < v if self.lo_open else self.lo <= v) and (v < self.hi if self.hi_open else v <= self.hi)

    def __str__(self) -> str:
        def fmt(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else f"{x:g}"

        return f"{'(' if self.lo_open else '['}{fmt(self.lo)}, {fmt(self.hi)}{')' if self.hi_open else ']'}"


# what a field may hold (besides its type); sizes are capped well above any sensible model, memory is checked
# separately from an estimate (workbench.train.presets.check_memory)
MODEL_RANGES = {"vocab_size": Range(2, 10**7), "n_classes": Range(1, 10**7), "d_model": Range(1, 65536),
                "n_heads": Range(1, 4096), "d_ff": Range(1, 262144), "n_layers": Range(1, 1024),
                "max_len": Range(1, 10**6), "dropout": Range(0, 1, hi_open=True), "seed": Range(0, 2**63 - 1)}
MODEL_CHOICES = {"arch": ARCHS, "final_ln": FINAL_LN, "activation": ACTIVATIONS}
_TYPE_WORDS = {int: "an integer", float: "a finite number", bool: "true or false", str: "a string",
               dict: "an object ({...})", list: "a list"}


def _type_error(section: str, name: str, value: Any, want: str, rng: Range | None = None) -> ValueError:
    extra = f" in {rng}" if rng is not None else ""
    return ValueError(f"{section}.{name}={value!r:.80}: must be {want}{extra}")


def _check_value(section: str, name: str, value: Any, hint: Any, rng: Range | None) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        rest = [a for a in args if a is not type(None)]
        hint, origin, args = rest[0], typing.get_origin(rest[0]), typing.get_args(rest[0])
    base = origin or hint
    if base is Any:
        return
    if base is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    elif base is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, base)
    if not ok:
        raise _type_error(section, name, value, _TYPE_WORDS.get(base, base.__name__), rng)
    if base is list and args:
        for i, v in enumerate(value):
            _check_value(section, f"{name}[{i}]", v, args[0], rng)
        return
    if rng is not None and base in (int, float) and value not in rng:
        raise _type_error(section, name, value, f"{_TYPE_WORDS[base]}", rng)


def check_fields(values: dict[str, Any], schema: type, section: str, ranges: dict[str, Range] | None = None,
                 choices: dict[str, tuple] | None = None) -> None:
    """ValueError naming `section.field`, the value and what is allowed, for the first value of `values` whose
    JSON type differs from the annotation of `schema`'s field, that lies outside `ranges[field]`, or that is
    not one of `choices[field]`. Unknown keys are an error too."""
    hints = typing.get_type_hints(schema)
    known = [f.name for f in dataclasses.fields(schema)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"unknown {section} fields {unknown}; known fields: {sorted(known)}")
    for name, value in values.items():
        _check_value(section, name, value, hints[name], (ranges or {}).get(name))
        allowed = (choices or {}).get(name)
        if allowed is not None and value not in allowed:
            raise ValueError(f"{section}.{name}={value!r:.80} is unknown; use one of {list(allowed)}")


@dataclass
class ModelConfig:
    """Architecture of one classifier (docs/paper.md §2).

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

        check_fields({f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "device"},
                     type(self), "model", MODEL_RANGES, MODEL_CHOICES)
        need(self.vocab_size >= 2, f"vocab_size={self.vocab_size} must be >= 2 (id 0 is PAD)")
        need(self.d_model % self.n_heads == 0,
             f"n_heads={self.n_heads} must divide d_model={self.d_model}; "
             f"choose n_heads in {[h for h in range(1, self.d_model + 1) if self.d_model % h == 0][:12]}...")
        need(set(self.dropout_sites) <= set(DROPOUT_SITES),
             f"model.dropout_sites={self.dropout_sites!r}: each entry must be one of {list(DROPOUT_SITES)}")
        need(not (self.arch == "decoder" and self.readout_include_pad),
             "model.readout_include_pad=True needs a mean readout, but arch='decoder' reads the last real token; "
             "use arch='paper' or 'encoder', or readout_include_pad=False")
        need(not self.unembed_vocab or self.n_classes <= self.vocab_size,
             f"model.unembed_vocab=True gives vocab_size={self.vocab_size} outputs, fewer than "
             f"n_classes={self.n_classes}; set unembed_vocab=False")
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
