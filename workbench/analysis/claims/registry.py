"""The registration of the verdicts (docs/preregistration.md): `registry.toml` beside this file, loaded and checked.

    reg = load_registry()
    reg.claim("rope-deposit-first-layer")["quote"]   # the paper's sentence the rule reads
    reg.status["settle_points"]                      # the numbers every rule uses

The file is the contract: a rule that reads a claim takes its thresholds from here, so a change to a rule is a
change to this file, visible in git (its commit registers it; `version` and `changed` say that it moved).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REGISTRY = Path(__file__).with_name("registry.toml")
CLAIM_KEYS = {"id", "version", "quote", "section", "scheme", "task", "settings", "statistic", "decision"}
DECISIONS = ("share", "ordering", "not testable")


@dataclass(frozen=True)
class Registry:
    registered: str
    status: dict[str, Any]
    deposit: dict[str, Any]
    decision: dict[str, dict[str, Any]]
    claims: tuple[dict[str, Any], ...]
    study: dict[str, Any]

    def claim(self, claim_id: str) -> dict[str, Any]:
        for c in self.claims:
            if c["id"] == claim_id:
                return c
        raise KeyError(f"no registered claim {claim_id!r}; registered: {', '.join(c['id'] for c in self.claims)}")

    @property
    def tiers(self) -> dict[int, dict[str, Any]]:
        """The seed study's tiers in order: 1 (`[study]` itself) and each `[study.tierN]` as N."""
        return study_tiers(self.study)


def study_tiers(study: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The tiers of a `[study]` table: {1: the table, N: its `tierN` sub-table}, in order ({} without a study)."""
    later = {int(k[4:]): t for k, t in study.items() if k.startswith("tier") and k[4:].isdigit()}
    return ({1: study} if study else {}) | dict(sorted(later.items()))


def parse_registry(data: dict[str, Any]) -> Registry:
    """A Registry from the TOML's tables; ValueError naming the claim and field when one is missing or wrong."""
    claims = data.get("claim", [])
    seen: set[str] = set()
    for c in claims:
        missing = CLAIM_KEYS - set(c)
        if missing:
            raise ValueError(f"registry claim {c.get('id', '?')!r}: missing {sorted(missing)}")
        if c["decision"] not in DECISIONS:
            raise ValueError(f"registry claim {c['id']!r}: decision {c['decision']!r} is not one of {DECISIONS}")
        if c["decision"] == "share" and "agree" not in c:
            raise ValueError(f"registry claim {c['id']!r}: a share decision needs `agree` (what one run must show)")
        if c["decision"] == "not testable" and "why" not in c:
            raise ValueError(f"registry claim {c['id']!r}: `not testable` needs `why`")
        if c["id"] in seen:
            raise ValueError(f"registry claim {c['id']!r} is registered twice")
        seen.add(c["id"])
    study = data.get("study", {})
    for cid in [c for t in study_tiers(study).values() for c in t.get("claims", [])]:
        if cid not in seen:
            raise ValueError(f"registry study names claim {cid!r}, which is not registered")
    return Registry(registered=data["registered"], status=data["status"], deposit=data["deposit"],
                    decision=data["decision"], claims=tuple(claims), study=data.get("study", {}))


@lru_cache(maxsize=1)
def load_registry(path: str | Path = REGISTRY) -> Registry:
    with open(path, "rb") as f:
        return parse_registry(tomllib.load(f))


def registered_settings(claim_id: str, scheme: str) -> tuple[str, ...]:
    """The settings claim `claim_id` is registered for (registry.toml) when `scheme` is the claim's own (its
    `scheme`); the `paper` arch alone for a scheme its sentence names beside it (`also_schemes`: Relative in
    `nope-no-generalise-t1`: the grids train Relative in that arch only)."""
    c = load_registry().claim(claim_id)
    if scheme != c["scheme"] and scheme not in c.get("also_schemes", []):
        raise ValueError(f"claim {claim_id!r} is registered for {[c['scheme'], *c.get('also_schemes', [])]}, "
                         f"not {scheme!r}")
    return tuple(c["settings"]) if c["scheme"] == scheme else ("paper",)


def registered_schemes(claim_id: str) -> tuple[str, ...]:
    """The schemes claim `claim_id` judges: its `scheme`, then those its sentence names beside it (`also_schemes`)."""
    c = load_registry().claim(claim_id)
    return (c["scheme"], *c.get("also_schemes", []))
