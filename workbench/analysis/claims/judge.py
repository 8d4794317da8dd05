"""Every claim row of the core paper at one preset: `claims(store, runs)`."""
from __future__ import annotations

import pandas as pd

from ..common import scheme_label
from .deposits import (_absolute_heads_claim, _causal_claims, _per_seed_deposit_claim, _rope_absolute_claim,
                       _rope_shallow_claim)
from .mla import _mla_claims
from .orderings import _no_generalise_claim, _overfit_claim, _poor_claim, _ranking_claim, _table1_order_claims
from .partial_rope import _partial_rope_claim
from .registry import registered_schemes, registered_settings
from .rules import ROW_COLUMNS, Thresholds
from .runs import run_table


def claims(store, runs: pd.DataFrame | None = None, th: Thresholds = Thresholds()) -> pd.DataFrame:
    """Every qualitative claim of the core paper (docs/paper.md), one row per (claim, setting) with an outcome
    (OUTCOMES), its evidence, the runs behind it and what kind of evidence it rests on (`evidence_kind`:
    accuracy, curves, deposits or overfit). `runs` must be of one preset (the claims compare settings, not
    scales; `ladder` compares presets): ValueError otherwise."""
    runs = run_table(store) if runs is None else runs
    presets = sorted(set(runs.preset.dropna()))
    if len(presets) > 1:
        raise ValueError(f"claims: the runs span presets {presets}; pass the runs of one preset "
                         "(e.g. runs[runs.preset == 'repro'])")
    t1, t2 = "trigger-distance", "trigger-count"
    rows: list[dict] = []
    kinds: list[str] = []

    def add(new, kind: str) -> None:
        new = [new] if isinstance(new, dict) else new
        rows.extend(new)
        kinds.extend([kind] * len(new))

    add(_ranking_claim(runs, "RoPE converges fastest on Task 1", "RoPE converges fastest", "rope", 1,
                       claim_id="rope-converges-fastest"), "curves")
    add(_ranking_claim(runs, "absolute (sinusoidal) converges second on Task 1", "absolute is second",
                       "sinusoidal", 2, claim_id="absolute-second"), "curves")
    add(_absolute_heads_claim(store, runs, th), "deposits")
    add(_rope_shallow_claim(store, runs, th), "deposits")
    for scheme in ("nope", "alibi", "relative"):
        add(_per_seed_deposit_claim(
            store, runs, th, f"no deposit for {scheme_label(scheme)} on Task 1", "no deposit for NoPE, ALiBi, "
            "relative", scheme, t1, lambda d: not d["single_head_deposit"].any(), claim_id=f"no-deposit-{scheme}-t1",
            contrast=("rope", t1)), "deposits")
    add(_per_seed_deposit_claim(
        store, runs, th, "no deposit for RoPE on Task 2", "none for RoPE on Task 2", "rope", t2,
        lambda d: not d["single_head_deposit"].any(), claim_id="no-deposit-rope-t2", contrast=("rope", t1)),
        "deposits")
    add(_rope_absolute_claim(store, runs, th), "deposits")
    add(_overfit_claim(runs, th), "overfit")
    add(_poor_claim(runs, th, "alibi", "ALiBi converges poorly on Task 1", "ALiBi converges poorly"), "accuracy")
    for scheme in registered_schemes("nope-no-generalise-t1"):
        add(_no_generalise_claim(runs, th, scheme, registered_settings("nope-no-generalise-t1", scheme)),
            "accuracy")
    add(_mla_claims(store, runs, th), "deposits")
    add(_table1_order_claims(runs, th), "accuracy")
    add(_partial_rope_claim(store, runs, th), "deposits")
    add(_causal_claims(store, runs, th), "deposits")
    out = pd.DataFrame(rows, columns=ROW_COLUMNS)
    out["evidence_kind"] = kinds
    return out
