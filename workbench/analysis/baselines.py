"""Reference levels for accuracy: chance and the best length-only predictor.

- chance = 1 / n_classes (a uniform random guess);
- length-only = the accuracy of the best classifier that sees only the sequence's length (number of non-pad
  tokens): predict, for each length, the most frequent label among the examples of that length,
  acc = sum_len max_y count(len, y) / N. It is fitted on the split it scores, so it is the ceiling of any
  function of length alone on that split. In the `paper` architecture with the authors' fidelity settings
  (no attention mask, pads in the mean) the length is visible to every model, NoPE included, so this is the
  level a NoPE model can reach on Task 1 without positional information (seed 003, Table 1: NoPE 3.5 %).
  On Task 2 every example has the same length and it reduces to the majority-class share.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .common import lengths, split_xy


def chance(n_classes: int) -> float:
    """1 / n_classes."""
    if n_classes < 1:
        raise ValueError(f"n_classes={n_classes}: need at least one class")
    return 1.0 / n_classes


def length_only_accuracy(x: np.ndarray, y: np.ndarray) -> float:
    """sum over lengths of the count of the most frequent label of that length, over N (x right-padded, 0 = PAD)."""
    if len(y) == 0:
        return float("nan")
    counts = pd.crosstab(lengths(np.asarray(x)), np.asarray(y))
    return float(counts.max(axis=1).sum() / len(y))


def split_baselines(data, n_classes: int, splits: list[str] | None = None,
                    ignore_label: int | None = None) -> pd.DataFrame:
    """Rows split, chance, length_only, n (examples) for the named splits of a Dataset (default: train, test), over
    the examples not labelled `ignore_label` (`train.ignore_label`: those a run's accuracy is measured on)."""
    rows = []
    for name in splits or ["train", "test"]:
        x, y = split_xy(data, name)
        if ignore_label is not None:
            keep = np.asarray(y) != ignore_label
            x, y = np.asarray(x)[keep], np.asarray(y)[keep]
        rows.append({"split": name, "chance": chance(n_classes), "length_only": length_only_accuracy(x, y),
                     "n": int(len(y))})
    return pd.DataFrame(rows)


_CACHE: dict[tuple, pd.DataFrame] = {}


def run_baselines(run) -> pd.DataFrame | None:
    """split_baselines of a store run's train and test splits over the examples its accuracy counts (not those of its
    `train.ignore_label`; cached per dataset hash); None when the run has no dataset to read (a hand-made or foreign
    run)."""
    load = getattr(run, "load_dataset", None)
    config = getattr(run, "config", {}) or {}
    cfg = config.get("model", {}) or {}
    if load is None or not cfg.get("n_classes"):
        return None
    ignore = (config.get("train") or {}).get("ignore_label")
    key = ((getattr(run, "info", {}) or {}).get("dataset_hash"), int(cfg["n_classes"]), ignore)
    if key[0] is None or key not in _CACHE:
        df = split_baselines(load(), int(cfg["n_classes"]), ignore_label=ignore)
        if key[0] is None:
            return df
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[key] = df
    return _CACHE[key]
