"""Length extrapolation: accuracy and loss vs. test length.

The regular test split and every length-extrapolation split of the dataset (`Dataset.extrap`: Task 1
`len1.25x`, `len1.5x`, `len2x` and `shifted`, the trigger pair placed beyond the training length; Task 2
`len*x`) are evaluated with the trained model, with 95 % bootstrap intervals over examples. Each row also
carries the split's reference levels (`baselines`): chance 1 / n_classes and the best length-only predictor. A scheme whose
`can_extrapolate` is False (`learned`: no embedding past max_len) raises NotApplicable.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch.nn.functional as F

from .baselines import chance, length_only_accuracy
from .common import (batches, bootstrap_means, evaluating, lengths, NotApplicable, percentile_interval, split_xy,
                      subsample, train_length)


def extrapolating_schemes() -> str:
    from workbench.model import list_schemes

    return ", ".join(n for n, cls in list_schemes().items() if getattr(cls, "can_extrapolate", True))


def evaluate(model, x: np.ndarray, y: np.ndarray, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-example correctness and loss (NaN where the label is outside the classifier's classes)."""
    C = model.cfg.n_classes
    correct = np.zeros(len(x), bool)
    loss = np.full(len(x), np.nan)
    out_of_range = int(((y < 0) | (y >= C)).sum())
    with evaluating(model):
        for idx, tok, lab in batches(x, batch_size, y, trim=model.cfg.pads_are_inert,
                                     device=model.cfg.device):
            logits = model(tok)
            ok = (lab >= 0) & (lab < C)
            correct[idx] = (logits.argmax(-1) == lab).cpu().numpy()
            li = F.cross_entropy(logits[ok], lab[ok], reduction="none").double().cpu().numpy()
            sel = idx[ok.cpu().numpy()]
            loss[sel] = li
    return correct, loss, out_of_range


def compute(model, data, splits: list[str] | None = None, batch_size: int = 64, n_boot: int = 1000, seed: int = 0,
            level: float = 0.95, max_examples: int | None = None) -> pd.DataFrame:
    scheme = model.scheme
    if not getattr(scheme, "can_extrapolate", True):
        raise NotApplicable(f"scheme {scheme.name!r}, as this run configures it, cannot run past its training "
                            f"length ({getattr(scheme, 'extrapolation', '')}); length extrapolation works for "
                            f"{extrapolating_schemes()} (at their default settings)")
    extrap = getattr(data, "extrap", {}) or {}
    names = splits if splits is not None else ["test", *extrap.keys()]
    if len(names) <= 1 and splits is None:
        raise NotApplicable("the dataset has no length-extrapolation splits (extrap_size = 0?); regenerate it "
                            "with extrap_size > 0 to measure extrapolation")
    L_real = train_length(model, data)
    rows = []
    for name in names:
        x, y = split_xy(data, name)
        keep = subsample(len(x), max_examples, seed)
        x, y = x[keep], y[keep]
        correct, loss, oor = evaluate(model, x, y, batch_size)
        lens = lengths(x)
        row = {"split": name, "seq_len": int(x.shape[1]), "mean_len": float(lens.mean()), "max_len": int(lens.max()),
               "length_factor": float(lens.max() / max(L_real, 1)), "n_examples": int(len(x)),
               "accuracy": float(correct.mean()), "loss": float(np.nanmean(loss)) if np.isfinite(loss).any() else np.nan,
               "n_label_out_of_range": oor, "in_training_range": bool(lens.max() <= L_real),
               "train_len": L_real, "chance": chance(model.cfg.n_classes),
               "length_only": length_only_accuracy(x, y)}
        if n_boot > 0:
            ok = np.isfinite(loss)
            reps = bootstrap_means(correct.astype(float), n_boot, seed)[:, 0]
            row["acc_lo"], row["acc_hi"] = (float(v) for v in percentile_interval(reps, level))
            if ok.any():
                reps_l = bootstrap_means(loss[ok], n_boot, seed)[:, 0]
                row["loss_lo"], row["loss_hi"] = (float(v) for v in percentile_interval(reps_l, level))
        rows.append(row)
    df = pd.DataFrame(rows)
    return df.sort_values(["max_len", "split"], kind="stable").reset_index(drop=True)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: accuracy on each split."""
    return "accuracy: " + ", ".join(f"{r.split} ({int(r.max_len)} tok) {r.accuracy:.3f}" for r in df.itertuples())
