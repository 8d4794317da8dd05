"""Positional-encoding schemes, one module each, behind one registry."""
from .base import Scheme
from .registry import SCHEMES, get_scheme, list_schemes, register, scheme_label

__all__ = ["Scheme", "SCHEMES", "get_scheme", "list_schemes", "register", "scheme_label"]
