"""The scheme registry: name -> Scheme class. Adding a scheme = one file + one line in `_MODULES` (docs/schemes.md,
"Adding a scheme")."""
from __future__ import annotations

import importlib

from .base import Scheme

_MODULES = ["nope", "sinusoidal", "learned", "random", "relative", "t5", "alibi", "rope",
            "rope_sinusoidal", "mla", "coca", "fope", "tapa", "wavelet", "legendre"]
SCHEMES: dict[str, type[Scheme]] = {}


def register(cls: type[Scheme]) -> type[Scheme]:
    """Class decorator: `cls` under `cls.name`; a second class under a taken name is refused."""
    taken = SCHEMES.get(cls.name)
    if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"scheme name {cls.name!r} is taken by {taken.__module__}.{taken.__qualname__}; give "
                         f"{cls.__module__}.{cls.__qualname__} another name")
    SCHEMES[cls.name] = cls
    return cls


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in _MODULES:
            importlib.import_module(f"{__package__}.{module}")
        _loaded = True


def get_scheme(name: str) -> type[Scheme]:
    _load()
    if name not in SCHEMES:
        raise ValueError(f"unknown scheme {name!r}; known schemes: {', '.join(SCHEMES)}")
    return SCHEMES[name]


def list_schemes() -> dict[str, type[Scheme]]:
    _load()
    order = {module: i for i, module in enumerate(_MODULES)}
    return dict(sorted(SCHEMES.items(), key=lambda kv: order.get(kv[1].__module__.rsplit(".", 1)[-1], len(order))))


def scheme_label(name: str) -> str:
    """The display name of scheme `name` ("RoPE"), or `name` itself when no scheme is registered under it."""
    _load()
    return SCHEMES[name].label if name in SCHEMES else name
