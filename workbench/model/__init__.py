"""The hooked PE classifier, its config, and the positional-encoding registry."""
from .attention import Attention
from .classifier import PEClassifier
from .config import ModelConfig
from .pe import SCHEMES, Scheme, get_scheme, list_schemes

__all__ = ["Attention", "ModelConfig", "PEClassifier", "SCHEMES", "Scheme", "get_scheme", "list_schemes"]
