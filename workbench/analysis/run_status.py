"""What a run can show (issue 21): one rule each for *learned*, *still learning*, *diverged* and *at the ceiling*,
from the run's per-epoch metrics and its data's reference levels alone, so every verdict reads runs the same way.

    reference      = max(chance, length-only): chance = 1 / n_classes; length-only = the accuracy of the best
                     predictor from the sequence length alone, fitted on the test split itself (its ceiling;
                     baselines.length_only_accuracy). A NoPE model in the `paper` arch can reach it on Task 1.
    learned        final test accuracy >= reference + learned_margin (0.10): clearly above both
    diverged       a non-finite loss in any epoch, or the last epoch's train or test loss above
                   diverged_factor (3) x ln(n_classes), three times the loss of a uniform guess
    ceiling        final test accuracy >= ceiling (0.98): two such runs cannot be ranked
    still learning not diverged, not at the ceiling, and the last epoch raised the test accuracy by
                   >= still_learning (0.01 = 1 point): the run stopped while it was improving, though the cosine
                   schedule had taken the learning rate to about 0; more epochs may change it. Test accuracy only:
                   the recorded train accuracy is a running mean over the epoch (biased upwards between epochs
                   while a model improves), and a train accuracy that rises while the test accuracy does not is
                   memorisation, not learning the task
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class StatusRules:
    """The numbers the run rules depend on (printed with the verdicts)."""

    learned_margin: float = 0.10
    ceiling: float = 0.98
    still_learning: float = 0.01
    diverged_factor: float = 3.0


STATUSES = ("diverged", "did not learn, still learning", "did not learn", "still learning", "ceiling", "learned")


def _gain(m: pd.DataFrame, col: str) -> float:
    """The last epoch's change of `col` (NaN with fewer than two finite epochs)."""
    v = m[col].to_numpy(dtype=float) if col in m else np.array([])
    return float(v[-1] - v[-2]) if len(v) >= 2 and np.isfinite(v[-2:]).all() else np.nan


def run_status(metrics: pd.DataFrame, n_classes: int, length_only: float = np.nan,
               rules: StatusRules = StatusRules()) -> dict:
    """{learned, still_learning, diverged, ceiling, reference, status, why} of one run from its metrics rows
    (epoch, test_acc, train_loss, test_loss)."""
    m = metrics.sort_values("epoch") if "epoch" in metrics else metrics
    if m.empty:
        raise ValueError("run_status needs at least one epoch of metrics")
    chance = 1.0 / n_classes
    reference = max(chance, length_only) if np.isfinite(length_only) else chance
    final = float(m["test_acc"].iloc[-1])
    losses = m[[c for c in ("train_loss", "test_loss") if c in m]].to_numpy(dtype=float)
    bound = rules.diverged_factor * math.log(n_classes)
    diverged = bool((~np.isfinite(losses)).any() or (losses[-1] > bound).any())
    learned = bool(final >= reference + rules.learned_margin and not diverged)
    ceiling = bool(final >= rules.ceiling)
    gain = _gain(m, "test_acc")
    still = bool(np.isfinite(gain) and gain >= rules.still_learning and not ceiling and not diverged)
    if diverged:
        status, why = "diverged", f"loss {losses[-1].max():.3g} > {rules.diverged_factor:g} ln({n_classes}) = {bound:.2f}"
    elif not learned:
        status = "did not learn, still learning" if still else "did not learn"
        why = f"test acc {final:.3f} < reference {reference:.3f} + {rules.learned_margin:g}"
    else:
        status = "ceiling" if ceiling else ("still learning" if still else "learned")
        why = f"test acc {final:.3f}"
    if still:
        why += f"; last epoch {gain:+.3f}"
    return {"learned": learned, "still_learning": still, "diverged": diverged, "ceiling": ceiling,
            "reference": reference, "status": status, "why": why}
