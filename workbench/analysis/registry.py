"""Moved: the registration's loader lives in `workbench.analysis.claims.registry` (beside the rules that read it).
This name is kept so imports written before the move keep working."""
from .claims.registry import DECISIONS, CLAIM_KEYS, REGISTRY, Registry, load_registry, parse_registry  # noqa: F401
