"""Counterfactual pairs for activation patching (docs/paper.md §5), drawn with the tasks' own generator logic.

Each pair (clean, counterfactual) differs only in the quantity the task asks for; both have the same real
length, so their padding is identical:

* Task 1 (trigger distance): a clean row exactly as `_distance_rows` builds it (left / middle / right drawn
  from the spec's ranges, iid filler, truncated to max_tokens); the counterfactual keeps the filler words in
  the same order and moves only the second trigger, so the distance changes from d = middle + 1 to
  d' = middle' + 1 (middle' != middle, drawn uniformly from the spec's middle range where it still fits
  before `right_min` filler words at the end).
* Task 2 (trigger count): a clean row as `_count_rows` builds it with n <= count_max - 1 triggers; the
  counterfactual swaps one filler word (a random one) for a trigger, so n -> n + 1.

`trigger_mask` marks the positions that hold a trigger in the clean or the counterfactual row (patching
"at trigger positions"). Random stream: `SeedSequence([seed, 100])`, apart from the dataset's streams.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .generators import _count_rows, _rng, _u

STREAM = 100


@dataclass
class CounterfactualPairs:
    """clean_x, cf_x: int64 [N, seq_len] (PAD = 0, same padding); clean_y, cf_y: int64 [N];
    trigger_mask: bool [N, seq_len]."""

    clean_x: np.ndarray
    clean_y: np.ndarray
    cf_x: np.ndarray
    cf_y: np.ndarray
    trigger_mask: np.ndarray

    def __len__(self) -> int:
        return len(self.clean_y)


def _filler_pool(spec, triggers: np.ndarray) -> np.ndarray:
    words = np.arange(1, spec.vocab_size, dtype=np.int64)
    if spec.task == "trigger-distance" and spec.filler_includes_triggers:
        return words
    return np.setdiff1d(words, triggers)


def _distance_pairs(spec, triggers: np.ndarray, n: int, rng) -> tuple:
    w1, w2 = int(triggers[0]), int(triggers[1])
    pool = _filler_pool(spec, triggers)
    left, middle = _u(rng, spec.left_min, spec.left_max, n), _u(rng, spec.middle_min, spec.middle_max, n)
    right = _u(rng, spec.right_min, spec.right_max, n)
    n_real = np.minimum(left + middle + right + 2, spec.max_tokens)
    # the counterfactual middle: any other value of the spec's range that leaves right_min words at the end
    hi = np.minimum(spec.middle_max, n_real - left - 2 - spec.right_min)
    ok = hi > spec.middle_min  # at least two admissible middles, so one differs from the clean one
    left, middle, n_real, hi = left[ok], middle[ok], n_real[ok], hi[ok]
    m = len(left)
    other = _u(rng, spec.middle_min, hi - 1, m)
    middle_cf = np.where(other >= middle, other + 1, other)  # uniform over the admissible range minus `middle`
    filler = pool[rng.integers(0, len(pool), size=(m, spec.seq_len))]
    cols = np.arange(spec.seq_len)[None, :]

    def build(mid):
        x = np.zeros((m, spec.seq_len), np.int64)
        p1, p2 = left, left + mid + 1
        # real slots except p1 and p2 take the filler words in order: slot j gets filler[j - #triggers before j]
        shift = (cols > p1[:, None]).astype(np.int64) + (cols > p2[:, None])
        src = np.clip(cols - shift, 0, spec.seq_len - 1)
        x[:] = np.take_along_axis(filler, src, 1)
        x[cols >= n_real[:, None]] = 0
        r = np.arange(m)
        x[r, p1], x[r, p2] = w1, w2
        return x, mid + 1

    clean_x, clean_y = build(middle)
    cf_x, cf_y = build(middle_cf)
    return clean_x, clean_y, cf_x, cf_y


def _count_pairs(spec, triggers: np.ndarray, n: int, rng) -> tuple:
    if spec.count_max <= spec.count_min:
        raise ValueError(f"count_min={spec.count_min}, count_max={spec.count_max}: a counterfactual needs room for "
                         "one more trigger; use a task with count_max > count_min")
    pool = _filler_pool(spec, triggers)
    counts = _u(rng, spec.count_min, min(spec.count_max - 1, spec.max_tokens - 1), n)
    clean_x, clean_y = _count_rows(rng, triggers, pool, counts, spec.max_tokens, spec.seq_len)
    is_filler = np.isin(clean_x, pool)
    # one filler position per row, uniformly among the row's filler positions
    pick = np.argmax(np.where(is_filler, rng.random(clean_x.shape), -1.0), axis=1)
    cf_x = clean_x.copy()
    cf_x[np.arange(n), pick] = triggers[rng.integers(0, len(triggers), n)]
    return clean_x, clean_y, cf_x, clean_y + 1


def counterfactual_pairs(spec, triggers, n: int, seed: int = 0) -> CounterfactualPairs:
    """`n` (clean, counterfactual) pairs for the task of `spec` with its trigger ids (`Dataset.trigger_ids`).

    Task 1 drops the rare draws whose sequence leaves no other admissible distance, so it may return fewer
    than `n` pairs (never zero for a valid spec)."""
    if n < 1:
        raise ValueError(f"n={n} must be >= 1 (number of counterfactual pairs)")
    triggers = np.asarray(triggers, dtype=np.int64)
    if len(triggers) == 0:
        raise ValueError("the dataset has no trigger ids: counterfactual pairs need a trigger task "
                         "(trigger-distance or trigger-count)")
    rng = _rng(seed, STREAM)
    if spec.task == "trigger-distance":
        clean_x, clean_y, cf_x, cf_y = _distance_pairs(spec, triggers, n, rng)
    elif spec.task == "trigger-count":
        clean_x, clean_y, cf_x, cf_y = _count_pairs(spec, triggers, n, rng)
    else:
        raise ValueError(f"task={spec.task!r} has no counterfactual generator; use trigger-distance or trigger-count")
    if len(clean_y) == 0:
        raise ValueError(f"no counterfactual pair fits the {spec.task} spec (middle range too narrow); widen "
                         "middle_min..middle_max")
    trig = np.isin(clean_x, triggers) | np.isin(cf_x, triggers)
    return CounterfactualPairs(clean_x, clean_y, cf_x, cf_y, trig & (clean_x != 0))
