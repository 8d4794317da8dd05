"""Linear probes (Alain & Bengio 2016) with shuffled-label controls (after Hewitt & Liang 2019's control
tasks), fitted with scikit-learn and cross-validated (docs/paper.md §5).

Three probes, one row per site:

* `position`: the absolute position p of every non-pad token, from the embedded input
  (`blocks.0.hook_resid_pre`, layer -1) and from every `blocks.{l}.hook_resid_post`; ridge regression,
  score = cross-validated R^2 (folds grouped by example). `baseline` = the R^2 of the same probe on the
  sequence length alone: a permutation-invariant model still "knows" E[p | length] when lengths vary.
* `label_head`: the task label from each head's `hook_z` -- at the second trigger for Task 1, the mean over
  non-pad positions otherwise (Task 2); multinomial logistic regression, score = accuracy.
* `label_stream`: the label from the pooled stream per layer (the model's own readout of
  `blocks.{l}.hook_resid_post`: masked mean, or the last token in the decoder); logistic regression.

Every probe is standardised features -> linear model, k-fold cross-validated; score_lo/score_hi is the
t interval of the mean over folds; `control` is the same probe on labels shuffled across the rows, and
`selectivity` = score - control. `baseline` for the label probes is the majority-class accuracy.

Solver: the label probes minimise scikit-learn's `LogisticRegression` objective (multinomial cross-entropy summed
over the training fold times C, plus ||W||^2 / 2, intercept unpenalised; classes absent from a training fold are
never predicted) -- but for every head, fold and the shuffled control at once, as one batched full-batch L-BFGS in
torch (float32, `DTYPE`) over independent problems. The features are collected in one pass for all heads and layers. The
per-fit scikit-learn loop it replaces took minutes per run; benchmarks/bench_probes.py runs both side by side.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch

from .common import batches, cache_hooks, evaluating, NotApplicable, split_xy, subsample, trigger_pair

PROBES = ("position", "label_head", "label_stream")
DTYPE = torch.float32  # the batched logistic solve (float64: 4x slower; fold accuracies within 0.002)


def _cv(make, X: np.ndarray, y: np.ndarray, folds, seed: int, groups=None) -> tuple[np.ndarray, np.ndarray]:
    """Fold scores of the probe on (X, y) and on shuffled y (the control), with OpenBLAS on torch's thread count
    (which the tables' provenance records): the ridge fits' sums follow OpenBLAS's threads, 1.67e-06 apart in
    `score_lo` at 1 and 2 threads on the same weights (benchmarks/measured/cpu-probes-residue-2026-12-07)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import cross_val_score
    from threadpoolctl import threadpool_limits

    y_shuf = np.random.default_rng(seed).permutation(y)
    with warnings.catch_warnings(), threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        real = cross_val_score(make(), X, y, cv=folds, groups=groups)
        ctrl = cross_val_score(make(), X, y_shuf, cv=folds, groups=groups)
    return real, ctrl


def _interval(scores: np.ndarray, level: float) -> tuple[float, float, float]:
    from scipy import stats

    m = float(scores.mean())
    if len(scores) < 2:
        return m, np.nan, np.nan
    half = stats.t.ppf(0.5 + level / 2, len(scores) - 1) * scores.std(ddof=1) / np.sqrt(len(scores))
    return m, m - half, m + half


def _ridge(alpha: float):
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return lambda: make_pipeline(StandardScaler(), Ridge(alpha=alpha))


def fit_logistic(X: torch.Tensor, y: torch.Tensor, present: torch.Tensor, C: float, max_iter: int) -> tuple:
    """Independent multinomial logistic regressions, batched: X [B, n, d] (standardised), y [B, n] class indices,
    present [B, K] (classes of each training set). Minimises, per problem b, C * sum_i CE_i + ||W_b||^2 / 2 (the
    objective of scikit-learn's LogisticRegression; intercept unpenalised); absent classes get logit -inf. The
    problems are separable, so L-BFGS on their sum reaches each one's optimum. Returns (W [B, d, K], bias [B, K])."""
    B, n, d = X.shape
    K = present.shape[1]
    W = torch.zeros(B, d, K, dtype=X.dtype, requires_grad=True)
    b = torch.zeros(B, K, dtype=X.dtype, requires_grad=True)
    mask = torch.where(present, 0.0, -torch.inf).to(X.dtype)[:, None, :]
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=max_iter, history_size=20, tolerance_grad=1e-7,
                            tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        logits = torch.baddbmm(b[:, None, :], X, W) + mask
        ce = torch.nn.functional.cross_entropy(logits.reshape(B * n, K), y.reshape(-1), reduction="sum")
        loss = (ce + 0.5 / C * (W * W).sum()) / n  # each problem's objective / (C n): the same minimiser
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach(), b.detach()


def _logistic_cv(X: np.ndarray, y: np.ndarray, folds: list, seed: int, C: float, max_iter: int) -> tuple:
    """Fold accuracies of logistic probes on each of P feature sets X [P, n, d], for y and for shuffled y (the
    control): all P x folds x 2 fits batched, one solve per training-set size. Returns (real [P, folds], ctrl
    [P, folds])."""
    y_shuf = np.random.default_rng(seed).permutation(y)
    classes, codes = np.unique(np.stack([y, y_shuf]), return_inverse=True)
    codes = codes.reshape(2, -1)
    K, P = len(classes), X.shape[0]
    Xs, ys, present, tests = [], [], [], []
    for tr, te in folds:  # problem order: fold, then real/control, then feature set
        mu, sd = X[:, tr].mean(1, keepdims=True), X[:, tr].std(1, keepdims=True)
        sd[sd == 0] = 1.0  # StandardScaler: constant features stay 0
        Z = (X - mu) / sd
        for c in codes:
            Xs.append(Z[:, tr])
            ys.append(np.broadcast_to(c[tr], (P, len(tr))))
            present.append(np.broadcast_to(np.isin(np.arange(K), c[tr]), (P, K)))
            tests.append((Z[:, te], c[te]))
    # one batched solve per training-set size: folds of n examples differ by one where n_folds does not divide n
    W, b = [None] * len(Xs), [None] * len(Xs)
    for size in dict.fromkeys(x.shape[1] for x in Xs):
        idx = [i for i, x in enumerate(Xs) if x.shape[1] == size]
        Wg, bg = fit_logistic(torch.as_tensor(np.concatenate([Xs[i] for i in idx]), dtype=DTYPE),
                              torch.as_tensor(np.concatenate([ys[i] for i in idx])),
                              torch.as_tensor(np.concatenate([present[i] for i in idx])), C, max_iter)
        for j, i in enumerate(idx):
            W[i], b[i] = Wg[j * P:(j + 1) * P], bg[j * P:(j + 1) * P]
    W, b = torch.cat(W), torch.cat(b)
    mask = torch.where(torch.as_tensor(np.concatenate(present)), 0.0, -torch.inf).to(DTYPE)
    acc = []
    for i, (Zte, cte) in enumerate(tests):
        sl = slice(i * P, (i + 1) * P)
        pred = (torch.baddbmm(b[sl, None, :], torch.as_tensor(Zte, dtype=DTYPE), W[sl])
                + mask[sl, None, :]).argmax(-1)
        acc.append((pred.numpy() == cte[None]).mean(1))
    acc = np.asarray(acc).reshape(len(folds), 2, P)
    return acc[:, 0].T, acc[:, 1].T


def collect(model, x: np.ndarray, y: np.ndarray, task: str | None, triggers, max_tokens: int, seed: int,
            batch_size: int = 64):
    """Features of every probe: position rows (per token) and per-example head / pooled-stream features (the
    heads' z at Task 1's second trigger, `trigger_pair`; elsewhere their mean over the non-pad positions)."""
    cfg = model.cfg
    L = cfg.n_layers
    stream = ["blocks.0.hook_resid_pre"] + [f"blocks.{l}.hook_resid_post" for l in range(L)]
    zs = [f"blocks.{l}.attn.hook_z" for l in range(L)]
    pos_feats = [[] for _ in stream]
    pos, length, group, head_feats, pooled = [], [], [], [[] for _ in zs], [[] for _ in range(L)]
    with evaluating(model):
        for idx, tok, _ in batches(x, batch_size, device=cfg.device):
            store = cache_hooks(model, tok, stream + zs)
            real = tok != 0
            b, p = torch.nonzero(real, as_tuple=True)
            for i, n in enumerate(stream):
                pos_feats[i].append(store[n][b, p].cpu().numpy())
            pos.append(p.cpu().numpy())
            length.append(real.sum(1)[b].cpu().numpy())
            group.append(np.asarray(idx)[b.cpu().numpy()])
            at = trigger_pair(tok, y[idx], triggers)[1] \
                if task == "trigger-distance" and triggers is not None and len(triggers) >= 2 else None
            w = real.float() / real.float().sum(1, keepdim=True).clamp(min=1.0)
            for l, n in enumerate(zs):
                z = store[n]  # [B, pos, H, dh]
                f = z[torch.arange(len(tok)), at] if at is not None else torch.einsum("bp,bphe->bhe", w, z)
                head_feats[l].append(f.cpu().numpy())
                pooled[l].append(model.readout(store[stream[l + 1]], tok).cpu().numpy())
    pos, length, group = np.concatenate(pos), np.concatenate(length), np.concatenate(group)
    keep = subsample(len(pos), max_tokens, seed)
    return {"position": [np.concatenate(f)[keep] for f in pos_feats], "pos": pos[keep], "length": length[keep],
            "group": group[keep], "head": [np.concatenate(f) for f in head_feats],
            "pooled": [np.concatenate(f) for f in pooled]}


def compute(model, data, probes=PROBES, layers: list[int] | None = None, n_examples: int = 600,
            max_tokens: int = 6000, n_folds: int = 5, alpha: float = 1.0, C: float = 1.0, max_iter: int = 300,
            seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Cross-validated probes on up to `n_examples` test examples (position probe: at most `max_tokens` tokens)."""
    from sklearn.model_selection import GroupKFold, KFold

    cfg = model.cfg
    bad = [p for p in probes if p not in PROBES]
    if bad:
        raise ValueError(f"probes={bad} unknown; choose from {PROBES}")
    layers = list(range(cfg.n_layers)) if layers is None else [int(l) for l in layers]
    wrong = [l for l in layers if not -1 <= l < cfg.n_layers]
    if wrong:
        raise ValueError(f"layers={wrong} do not exist: this model has layers 0..{cfg.n_layers - 1} "
                         "(and -1 = the embedded input, for the position probe)")
    x, y = split_xy(data, "test")
    if y is None:
        raise ValueError("probes need labels: pass a Dataset or an (x, y) tuple")
    keep = subsample(len(x), n_examples, seed)
    x, y = x[keep], y[keep]
    if n_folds < 2 or len(x) < 2 * n_folds:
        raise ValueError(f"n_folds={n_folds} with {len(x)} examples: need n_folds >= 2 and at least 2 examples "
                         f"per fold (n_examples >= {2 * max(n_folds, 2)}); lower n_folds or raise n_examples")
    spec = getattr(data, "spec", None)
    triggers = getattr(data, "trigger_ids", None)
    feats = collect(model, x, y, getattr(spec, "task", None), triggers, max_tokens, seed)
    folds = KFold(n_folds, shuffle=True, random_state=seed)
    rows = []

    def add(probe, layer, head, metric, real, ctrl, baseline, n):
        score, lo, hi = _interval(real, level)
        rows.append({"probe": probe, "layer": layer, "head": head, "metric": metric, "score": score,
                     "score_lo": lo, "score_hi": hi, "control": float(ctrl.mean()),
                     "selectivity": score - float(ctrl.mean()), "baseline": baseline, "n_rows": n,
                     "n_folds": n_folds, "level": level})

    if "position" in probes:
        if len(np.unique(feats["group"])) < n_folds:
            raise ValueError(f"the position probe groups tokens by example: {n_folds} folds need >= {n_folds} "
                             "examples")
        gk = GroupKFold(n_folds)
        ridge = _ridge(alpha)
        base, _ = _cv(ridge, feats["length"][:, None].astype(float), feats["pos"].astype(float), gk, seed,
                      feats["group"])
        for l in sorted({-1, *layers}):  # the embedded input always, as the reference
            real, ctrl = _cv(ridge, feats["position"][l + 1], feats["pos"].astype(float), gk, seed, feats["group"])
            add("position", l, -1, "r2", real, ctrl, float(base.mean()), len(feats["pos"]))
    majority = float(np.bincount(y).max() / len(y))
    split = list(folds.split(x))
    probe_layers = [l for l in layers if l >= 0]
    if "label_head" in probes and probe_layers:  # every head of every layer in one solve
        X = np.stack([feats["head"][l][:, h] for l in probe_layers for h in range(cfg.n_heads)]).astype(np.float64)
        real, ctrl = _logistic_cv(X, y, split, seed, C, max_iter)
        head_scores = {(l, h): (real[i], ctrl[i]) for i, (l, h) in
                       enumerate((l, h) for l in probe_layers for h in range(cfg.n_heads))}
    if "label_stream" in probes and probe_layers:
        X = np.stack([feats["pooled"][l] for l in probe_layers]).astype(np.float64)
        real, ctrl = _logistic_cv(X, y, split, seed, C, max_iter)
        stream_scores = {l: (real[i], ctrl[i]) for i, l in enumerate(probe_layers)}
    for l in probe_layers:
        if "label_head" in probes:
            for h in range(cfg.n_heads):
                add("label_head", l, h, "accuracy", *head_scores[l, h], majority, len(y))
        if "label_stream" in probes:
            add("label_stream", l, -1, "accuracy", *stream_scores[l], majority, len(y))
    if not rows:
        raise NotApplicable(f"nothing to probe for probes={list(probes)}, layers={layers}")
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: position R² by layer and the best head label
    probe."""
    bits = []
    pos = df[df.probe == "position"]
    if len(pos):
        bits.append("position R² by layer: "
                    + ", ".join(f"{int(l)}: {v:.2f}" for l, v in zip(pos.layer, pos.score)))
    lab = df[df.probe == "label_head"]
    if len(lab):
        r = lab.loc[lab["selectivity"].idxmax()]
        bits.append(f"best head label probe: layer {int(r.layer)}, head {int(r['head'])}, acc {r.score:.2f} "
                    f"(selectivity {r.selectivity:+.2f})")
    return "; ".join(bits)
