"""The label probes' batched solver (`probes.fit_logistic` / `_logistic_cv`) against scikit-learn's
LogisticRegression, which it replaces: same objective, so the same predictions and fold accuracies."""
import numpy as np
import pytest
import torch

from workbench.analysis import probes


def _problems(n=240, d=6, k=5, P=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    centres = rng.normal(size=(P, k, d))
    X = centres[:, y] + rng.normal(scale=1.5, size=(P, n, d))  # P feature sets of varying difficulty
    X[1] *= 0.3
    return X, y


def test_batched_fit_equals_sklearn_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    X, y = _problems()
    y = y.copy()
    y[y == 4] = 3  # class 4 absent: must never be predicted
    present = torch.as_tensor(np.isin(np.arange(5), y))[None].expand(len(X), 5)
    W, b = probes.fit_logistic(torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y)[None].expand(len(X), -1),
                               present, C=0.5, max_iter=500)
    for p in range(len(X)):
        sk = LogisticRegression(C=0.5, tol=1e-10, max_iter=5000).fit(X[p], y)
        np.testing.assert_allclose(W[p][:, sk.classes_].numpy(), sk.coef_.T, atol=2e-3)
        logits = X[p] @ W[p].numpy() + b[p].numpy()
        logits[:, ~present[p].numpy()] = -np.inf
        assert (logits.argmax(1) == sk.predict(X[p])).mean() >= 0.99
        assert (logits.argmax(1) != 4).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cross_validated_accuracies_match_the_sklearn_loop(monkeypatch, dtype):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    monkeypatch.setattr(probes, "DTYPE", dtype)
    X, y = _problems(P=4)
    X[2, :, 0] = 3.0  # a constant feature (StandardScaler leaves it at 0)
    folds = KFold(4, shuffle=True, random_state=0)
    real, ctrl = probes._logistic_cv(X, y, list(folds.split(X[0])), seed=0, C=1.0, max_iter=300)
    y_shuf = np.random.default_rng(0).permutation(y)
    for p in range(len(X)):
        make = lambda: make_pipeline(StandardScaler(), LogisticRegression(C=1.0, tol=1e-8, max_iter=2000))  # noqa
        np.testing.assert_allclose(real[p], cross_val_score(make(), X[p], y, cv=folds), atol=1 / 60 + 1e-9)
        np.testing.assert_allclose(ctrl[p], cross_val_score(make(), X[p], y_shuf, cv=folds), atol=1 / 60 + 1e-9)
    assert real.mean() > ctrl.mean() + 0.2  # the planted signal is found, the shuffled labels are not
