"""Vectorised generators for both tasks, de-duplication, splits and the content hash.

Random streams: `Generator(PCG64(SeedSequence([seed, stream])))`, stream 0 = trigger draw, 1 = main
examples, 2+i = extrapolation split i, 1000 = the train/test permutation of Task 1's sampling="authors". Nothing depends on Python's `hash()` or on dict order.
"""
import hashlib
import platform

import numpy as np

from .dataset import Dataset
from .specs import TriggerCountSpec, TriggerDistanceSpec

GENERATOR_VERSION = "1"
SPLIT_STREAM = 1000  # random stream of the seeded train/test permutation (sampling="authors")


def _rng(seed, stream):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream])))


def _u(rng, lo, hi, n):
    """n draws from U{lo..hi} (hi may be an array)."""
    return rng.integers(lo, np.asarray(hi) + 1, size=n, dtype=np.int64)


def dedup(x, y):
    """Drop exact duplicate rows of x (first occurrence kept, order preserved). Returns x, y, n_removed."""
    x = np.ascontiguousarray(x)
    rows = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
    _, idx = np.unique(rows, return_index=True)
    idx.sort()
    return x[idx], y[idx], len(x) - len(idx)


def content_hash(spec, arrays):
    """sha256 over the canonical spec JSON and every array (name, shape, little-endian int64 bytes)."""
    h = hashlib.sha256(spec.to_json().encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype="<i8")
        h.update(f"|{name}:{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------- Task 1
def _distance_rows(rng, pool, w1, w2, left, middle, n_real, pad_len):
    """Rows with w1 at `left`, w2 at `left+middle+1`, iid filler elsewhere up to `n_real`, PAD after."""
    n = len(left)
    x = pool[rng.integers(0, len(pool), size=(n, pad_len))]
    x[np.arange(pad_len)[None, :] >= n_real[:, None]] = 0
    r = np.arange(n)
    x[r, left] = w1
    x[r, left + middle + 1] = w2
    return x, middle + 1


def _sample_without_replacement(rng, words, n, k, chunk=4096):
    """[n, k]: each row k distinct words in random order (the first k of a random permutation of `words`): one
    uniform key per word, the words of the k smallest keys in key order. `argpartition` finds those k, then only
    they are sorted: the same words as a full argsort's first k (keys tie with probability ~1e-11 a row), 1.6x
    faster for the paper's Task 1 (100,000 rows of 573 words)."""
    out = np.empty((n, k), dtype=np.int64)
    for i in range(0, n, chunk):
        m = min(chunk, n - i)
        keys = rng.random((m, len(words)))
        first = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < len(words) else np.argsort(keys, axis=1)
        order = np.argsort(np.take_along_axis(keys, first, axis=1), axis=1)
        out[i:i + m] = words[np.take_along_axis(first, order, axis=1)]
    return out


def _authors_distance_rows(rng, words, w1, w2, left, middle, right, n_real, pad_len):
    """The authors' Task 1 rows: each segment (left, middle, right) is a draw without replacement from `words`."""
    n = len(left)
    segs = [_sample_without_replacement(rng, words, n, max(1, int(seg.max(initial=1)))) for seg in (left, middle, right)]
    p = np.arange(pad_len)[None, :]
    lo, mi = left[:, None], middle[:, None]
    pick = lambda seg, j: np.take_along_axis(seg, np.clip(j, 0, seg.shape[1] - 1), axis=1)  # noqa: E731
    x = np.where(p < lo, pick(segs[0], p), pick(segs[2], p - lo - mi - 2))
    x = np.where((p > lo) & (p <= lo + mi), pick(segs[1], p - lo - 1), x)
    x = np.where(p == lo, w1, np.where(p == lo + mi + 1, w2, x))
    x[p >= n_real[:, None]] = 0
    return x, middle + 1


def _gen_distance(s: TriggerDistanceSpec):
    w1, w2 = _rng(s.seed, 0).choice(np.arange(1, s.vocab_size, dtype=np.int64), size=2, replace=False)
    words = np.arange(1, s.vocab_size, dtype=np.int64)
    pool = words if s.filler_includes_triggers else words[(words != w1) & (words != w2)]

    rng, n = _rng(s.seed, 1), s.n_examples
    left, middle, right = _u(rng, s.left_min, s.left_max, n), _u(rng, s.middle_min, s.middle_max, n), \
        _u(rng, s.right_min, s.right_max, n)
    n_real = np.minimum(left + middle + right + 2, s.max_tokens)       # truncation cuts `right` only
    if s.sampling == "authors":
        x, y = _authors_distance_rows(rng, words, w1, w2, left, middle, right, n_real, s.seq_len)
    else:
        x, y = _distance_rows(rng, pool, w1, w2, left, middle, n_real, s.seq_len)

    extrap, m = {}, s.extrap_size
    if m:
        for i, f in enumerate(s.extrap_factors):
            # longer sequences, every one exactly n_tok real tokens; middle as in training, extra length
            # goes to left/right context (left uniform over what fits, right takes the rest)
            n_tok, pad = s.extrap_lengths(f)
            r = _rng(s.seed, 2 + i)
            mid = _u(r, s.middle_min, s.middle_max, m)
            lft = _u(r, s.left_min, n_tok - mid - 2 - s.right_min, m)
            extrap[f"len{f:g}x"] = _distance_rows(r, pool, w1, w2, lft, mid, np.full(m, n_tok), pad)
        # "shifted": w1 (and so w2) at positions >= max_tokens, never seen in training
        n_tok, pad = s.extrap_lengths(s.shift_factor)
        r = _rng(s.seed, 2 + len(s.extrap_factors))
        mid = _u(r, s.middle_min, s.middle_max, m)
        lft = _u(r, s.max_tokens, n_tok - mid - 2 - s.right_min, m)
        extrap["shifted"] = _distance_rows(r, pool, w1, w2, lft, mid, np.full(m, n_tok), pad)
    return np.array([w1, w2], dtype=np.int64), x, y, extrap


# ---------------------------------------------------------------- Task 2
def _count_rows(rng, triggers, pool, counts, n_real, pad_len):
    """Rows of `counts` trigger tokens + (n_real - counts) filler, shuffled, PAD up to pad_len."""
    n = len(counts)
    trig = triggers[rng.integers(0, len(triggers), size=(n, n_real))]
    fill = pool[rng.integers(0, len(pool), size=(n, n_real))]
    x = np.where(np.arange(n_real)[None, :] < counts[:, None], trig, fill)
    x = rng.permuted(x, axis=1)
    return np.pad(x, ((0, 0), (0, pad_len - n_real))), counts.copy()


def _gen_count(s: TriggerCountSpec):
    words = np.arange(1, s.vocab_size, dtype=np.int64)
    triggers = np.sort(_rng(s.seed, 0).choice(words, size=s.n_triggers, replace=False))
    pool = np.setdiff1d(words, triggers)
    rng = _rng(s.seed, 1)
    x, y = _count_rows(rng, triggers, pool, _u(rng, s.count_min, s.count_max, s.n_examples), s.max_tokens,
                       s.seq_len)
    extrap = {}
    if s.extrap_size:
        for i, f in enumerate(s.extrap_factors):
            # longer sequences, counts kept in the training label range: the extra length is filler
            n_tok, pad = s.extrap_lengths(f)
            r = _rng(s.seed, 2 + i)
            extrap[f"len{f:g}x"] = _count_rows(r, triggers, pool, _u(r, s.count_min, s.count_max, s.extrap_size),
                                               n_tok, pad)
    return triggers, x, y, extrap


_GENERATORS = {"trigger-distance": _gen_distance, "trigger-count": _gen_count}


def _split_info(x, y, n_classes):
    real = (x != 0).sum(1)
    return dict(n=int(len(y)), seq_len=int(x.shape[1]), max_real_len=int(real.max(initial=0)),
                label_min=int(y.min(initial=n_classes)), label_max=int(y.max(initial=-1)),
                label_hist=np.bincount(y, minlength=n_classes).tolist())


def build_manifest(spec, triggers, train, test, extrap, n_dup, digest):
    """Manifest dict (JSON-able) for a generated dataset."""
    splits = {"train": train, "test": test, **extrap}
    return dict(task=spec.task, preset=spec.preset, seed=spec.seed, spec=spec.to_dict(), hash=digest,
                generator_version=GENERATOR_VERSION, numpy_version=np.__version__, python=platform.python_version(),
                n_classes=spec.n_classes, vocab_size=spec.vocab_size, seq_len=spec.seq_len,
                trigger_ids=[int(t) for t in triggers], n_generated=spec.n_examples, n_duplicates_removed=n_dup,
                splits={k: _split_info(x, y, spec.n_classes) for k, (x, y) in splits.items()})


def arrays_of(triggers, train, test, extrap):
    """Flat name -> array dict (what is hashed and stored)."""
    a = dict(trigger_ids=triggers, train_x=train[0], train_y=train[1], test_x=test[0], test_y=test[1])
    for k, (x, y) in extrap.items():
        a[f"extrap__{k}__x"], a[f"extrap__{k}__y"] = x, y
    return a


def generate(spec):
    """Generate the dataset of `spec` in memory (no cache): de-duplicate, then split train/test."""
    triggers, x, y, extrap = _GENERATORS[spec.task](spec)
    x, y, n_dup = dedup(x, y)
    if len(y) < 2:
        raise ValueError(f"n_examples={spec.n_examples} left {len(y)} unique example(s); raise n_examples")
    if getattr(spec, "sampling", "iid") == "authors":  # the authors shuffle (seeded) before splitting
        order = _rng(spec.seed, SPLIT_STREAM).permutation(len(y))
        x, y = x[order], y[order]
    n_train = min(max(round(spec.train_frac * len(y)), 1), len(y) - 1)
    train, test = (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])
    extrap = {k: dedup(*v)[:2] for k, v in extrap.items()}
    digest = content_hash(spec, arrays_of(triggers, train, test, extrap))
    manifest = build_manifest(spec, triggers, train, test, extrap, n_dup, digest)
    return Dataset.from_parts(spec, triggers, train, test, extrap, digest, manifest)
