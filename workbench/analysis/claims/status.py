"""What a run can show: one rule each for *learned*, *settled*, *diverged* and *at the ceiling*, from the run's
per-epoch metrics and its data's reference levels alone, so every verdict reads runs the same way. The numbers are
the registration's (`registry.toml`, `[status]`; docs/preregistration.md), never constants of this file.

    reference      = max(chance, length-only): chance = 1 / n_classes; length-only = the accuracy of the best
                     predictor from the sequence length alone, fitted on the test split itself (its ceiling;
                     baselines.length_only_accuracy). A NoPE model in the `paper` arch can reach it on Task 1.
    learned        the Wilson 95 % lower bound of the final test accuracy (n test examples) >= reference +
                   learned_share (0.20) x (1 - reference): a margin relative to the room above the reference, on
                   the test set's sampling error (an absolute +0.10 called 11.3 % on 101 labels learned), and not
                   diverged
    settled        |test acc(E) - test acc(e0)| < settle_points (1 point), e0 = max(1, floor(E / 2)): the last half
                   of training, which holds about 18 % of a cosine schedule's learning-rate budget, so the
                   annealing cannot make the window quiet by itself (the last epoch alone runs at 0.4-10 % of the
                   peak rate). A one-epoch run has e0 = E: settled, as the rule reads
    diverged       a non-finite loss in any epoch, or the last epoch's train or test loss above
                   diverged_factor (3) x ln(n_classes), three times the loss of a uniform guess
    ceiling        final test accuracy >= ceiling (0.98): two such runs cannot be ranked
    still learning (the reading of an accuracy ordering) not settled and below the ceiling, not diverged

The comparisons read accuracies rounded to 6 decimals (`common.exact`): accuracies are counts over n test examples,
and a change of exactly 1 point (60 of 6,000) computes as 0.00999999999999998, which the rule, read as written, does
not call settled.

A run *counts* for a mechanism claim (deposits, heads) only when it learned, settled and did not diverge: the
ceiling does NOT exempt it (a run at 99.98 % that rose 34 points in its last half is still forming its mechanism).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..common import exact
from .registry import load_registry


def _reg(key: str) -> float:
    return float(load_registry().status[key])


@dataclass(frozen=True)
class StatusRules:
    """The numbers the run rules depend on (printed with the verdicts): the registration's `[status]`."""

    learned_share: float = field(default_factory=lambda: _reg("learned_share"))
    ceiling: float = field(default_factory=lambda: _reg("ceiling"))
    settle_points: float = field(default_factory=lambda: _reg("settle_points"))
    diverged_factor: float = field(default_factory=lambda: _reg("diverged_factor"))


STATUSES = ("diverged", "did not learn, still learning", "did not learn", "still learning", "ceiling, not settled",
            "ceiling", "learned")
NOT_LEARNED = ("diverged", "did not learn, still learning", "did not learn")  # the STATUSES of a run that did not learn
COUNTS = ("learned", "ceiling")  # the STATUSES of a run a mechanism claim counts: learned, settled, not diverged


def _said(status: str) -> str:
    """How a status that does not count reads after "the run": diverged, did not learn (its why says whether it
    still moves), is still learning, is at the ceiling, not settled."""
    if status in NOT_LEARNED:
        return "diverged" if status == "diverged" else "did not learn"
    return "is at the ceiling, not settled" if status == "ceiling, not settled" else f"is {status}"


def as_read(sentence: str, reading: dict | str | None, brief: bool = False) -> str:
    """One run's sentence about its heads (its deposits, `deposit.deposit_sentence`) as the run rules let it be
    read: unchanged for a run that counts for a mechanism claim (`COUNTS`) or without a reading; led by "cannot
    tell" for one that did not learn or diverged (`NOT_LEARNED`: what its heads do is no learned mechanism, and a
    deposit's absence is no evidence); marked provisional for one still learning or at the ceiling but not settled
    (its mechanism may still be forming). `reading`: `status_of_run(run)` (status and why) or its status alone.
    `brief`: the short form, for a table whose `shows` column gives the status beside it ("cannot tell, the run did
    not learn: ...", "... (provisional: the run is still learning)")."""
    status, why = (reading.get("status"), reading.get("why")) if isinstance(reading, dict) else (reading, None)
    if not isinstance(status, str) or not status or status in COUNTS:
        return sentence
    if brief:
        return (f"cannot tell, the run {_said(status)}: {sentence}" if status in NOT_LEARNED
                else f"{sentence} (provisional: the run {_said(status)})")
    if status in NOT_LEARNED:
        return f"cannot tell, the run {_said(status)} ({why or 'by the registered run rules'}): {sentence}"
    because = f", {why}" if why else ""
    return f"{sentence} (provisional: the run {_said(status)}{because}; the claims count a run once it settles)"


def reading_note(reading: dict | None) -> tuple[str, str] | None:
    """(kind, text) of what a run's reading (`status_of_run`: status and why) means for its heads, for the surfaces
    that show them after the run's id: "warn" for a run that did not learn or diverged (its heads hold no learned
    mechanism; a missing deposit is no evidence), "info" for one still learning or at the ceiling but not settled
    (provisional), None for one that counts (`COUNTS`) or without a reading."""
    if not reading or not reading.get("status") or reading["status"] in COUNTS:
        return None
    st, why = reading["status"], reading.get("why") or "no reason recorded"
    if st in NOT_LEARNED:
        task = "" if st == "diverged" else " the task"
        return "warn", (f"{_said(st)}{task} by the registered run rules ({why}). Its heads hold no learned "
                        "mechanism: what they show, or lack, is no evidence of how the task is solved.")
    return "info", (f"{_said(st)} by the registered run rules ({why}). Read its heads as provisional: the claims "
                    "count a run once it settles.")


def read_runs(table: pd.DataFrame, shows: dict) -> pd.DataFrame:
    """`table` (an experiment table: rows of runs, `run_id`) with `shows`, each run's status ({run id: status}, as
    the run pickers give it), and its `deposit` sentence, where it has one, read by it (`as_read`, brief)."""
    table = table.assign(shows=table["run_id"].map(shows))
    if "deposit" in table.columns:
        table["deposit"] = [as_read(d, st, brief=True) for d, st in zip(table["deposit"], table["shows"])]
    return table


def wilson(p: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95 % interval of a proportion p measured on n trials (Wilson 1927): a run's accuracy on its n
    test examples, or a share of k agreeing runs of n."""
    if not n or not np.isfinite(p):
        return np.nan, np.nan
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def settle_window(epochs: int) -> int:
    """e0 = max(1, floor(E / 2)): the first epoch of the window `settled` reads (1-based)."""
    return max(1, epochs // 2)


def _window_change(m: pd.DataFrame) -> tuple[float, int]:
    """(test acc(E) - test acc(e0), e0); NaN with a non-finite accuracy at either end. One epoch: e0 = E, a change
    of 0 (the registered rule read as written: such a run is settled; only smoke runs have one epoch)."""
    v = m["test_acc"].to_numpy(dtype=float)
    e0 = settle_window(len(v))
    if not np.isfinite([v[e0 - 1], v[-1]]).all():
        return np.nan, e0
    return float(v[-1] - v[e0 - 1]), e0


def run_status(metrics: pd.DataFrame, n_classes: int, length_only: float = np.nan,
               rules: StatusRules | None = None, n_test: int | None = None) -> dict:
    """{learned, settled, still_learning, diverged, ceiling, reference, lower, status, why} of one run from its
    metrics rows (epoch, test_acc, train_loss, test_loss); `n_test`: the test set's size, for the Wilson lower
    bound of `learned` (unknown: the final accuracy itself is read, and `why` says so)."""
    rules = rules or StatusRules()
    m = metrics.sort_values("epoch") if "epoch" in metrics else metrics
    if m.empty:
        raise ValueError("run_status needs at least one epoch of metrics")
    chance = 1.0 / n_classes
    reference = max(chance, length_only) if np.isfinite(length_only) else chance
    final = float(m["test_acc"].iloc[-1])
    lower = wilson(final, int(n_test))[0] if n_test else final
    need = reference + rules.learned_share * (1 - reference)
    losses = m[[c for c in ("train_loss", "test_loss") if c in m]].to_numpy(dtype=float)
    bound = rules.diverged_factor * math.log(n_classes)
    diverged = bool((~np.isfinite(losses)).any() or (losses[-1] > bound).any())
    learned = bool(np.isfinite(lower) and lower >= need and not diverged)
    ceiling = bool(exact(final) >= rules.ceiling)
    change, e0 = _window_change(m)
    settled = bool(np.isfinite(change) and abs(exact(change)) < rules.settle_points and not diverged)
    still = bool(not settled and not ceiling and not diverged)
    lo_txt = f"Wilson lower bound {lower:.3f}" if n_test else f"test acc {final:.3f} (test set size unknown)"
    if diverged:
        status = "diverged"
        why = f"loss {losses[-1].max():.3g} > {rules.diverged_factor:g} ln({n_classes}) = {bound:.2f}"
    elif not learned:
        status = "did not learn, still learning" if still else "did not learn"
        why = (f"test acc {final:.3f}: {lo_txt} < reference {reference:.3f} + {rules.learned_share:g} x "
               f"(1 - reference) = {need:.3f}")
    else:
        status = ("ceiling" if settled else "ceiling, not settled") if ceiling else (
            "learned" if settled else "still learning")
        why = f"test acc {final:.3f}"
    if not settled and not diverged:
        why += (f"; epoch {e0} -> {len(m)}: {change:+.3f}" if np.isfinite(change)
                else "; a non-finite test accuracy: cannot judge settling")
    return {"learned": learned, "settled": settled, "still_learning": still, "diverged": diverged,
            "ceiling": ceiling, "reference": reference, "lower": lower, "status": status, "why": why}
