"""synthetic_tasks: labels recomputed from tokens, determinism, splits, extrapolation, cache, validation."""
import os
import subprocess
import sys

import numpy as np
import pytest

import synthetic_tasks as st
from synthetic_tasks import cache, generators

PRESETS = ["smoke", "cpu"]


@pytest.fixture(scope="module")
def datasets():
    return {(t, p): st.generate(st.get_spec(t, p)) for t in st.TASKS for p in PRESETS}


def real_len(x):
    """Non-pad length, after checking that padding is a contiguous right block."""
    nz = x != 0
    n = nz.sum(1)
    assert (nz == (np.arange(x.shape[1])[None] < n[:, None])).all(), "PAD inside a sequence or on the left"
    return n


def distance_labels(x, w1, w2):
    """Task 1 labels from tokens alone: pos(w2) - pos(w1), each trigger exactly once."""
    assert ((x == w1).sum(1) == 1).all() and ((x == w2).sum(1) == 1).all()
    p1, p2 = (x == w1).argmax(1), (x == w2).argmax(1)
    return p1, p2, p2 - p1


def all_splits(ds):
    return ds.splits().items()


# ------------------------------------------------------------------ labels recomputed from the tokens
@pytest.mark.parametrize("preset", PRESETS)
def test_distance_labels_and_layout(datasets, preset):
    ds = datasets["trigger-distance", preset]
    s = ds.spec
    w1, w2 = ds.trigger_ids
    assert ds.n_classes == s.middle_max + 2 and ds.seq_len == s.seq_len
    for name, (x, y) in all_splits(ds):
        assert x.dtype == np.int64 and y.dtype == np.int64 and x.ndim == 2 and len(x) == len(y) > 0
        n = real_len(x)
        p1, p2, lab = distance_labels(x, w1, w2)
        np.testing.assert_array_equal(lab, y, err_msg=name)
        assert y.min() >= s.middle_min + 1 and y.max() <= s.middle_max + 1 < ds.n_classes
        right = n - p2 - 1
        assert (right >= s.right_min).all(), "truncation must leave at least right_min words"
        if name in ("train", "test"):
            assert x.shape[1] == s.seq_len and (n <= s.max_tokens).all()
            assert (p1 >= s.left_min).all() and (p1 <= s.left_max).all()   # left is never cut
            assert (right <= s.right_max).all()
        # words are in 1..vocab_size-1
        assert x.max() < s.vocab_size and x.min() >= 0


def test_distance_truncation_cuts_only_right(datasets):
    ds = datasets["trigger-distance", "smoke"]     # smoke: left+middle+right+2 can reach 26 > max_tokens 24
    s = ds.spec
    x = ds.train_x
    n = real_len(x)
    p1, p2, _ = distance_labels(x, *ds.trigger_ids)
    cut = n == s.max_tokens
    assert cut.sum() > 10, "smoke preset should exercise truncation"
    # rows at max length whose natural length was longer: right was shortened, left/middle intact
    assert (p1[cut] <= s.left_max).all() and (p2[cut] < s.max_tokens).all()
    natural_max = s.left_max + s.middle_max + s.right_max + 2
    assert natural_max > s.max_tokens and (n <= s.max_tokens).all()
    # among rows with the longest left+middle, right is cut to what is left of max_tokens
    long_lm = (p2 == s.left_max + s.middle_max + 1)
    if long_lm.any():
        assert (n[long_lm] - p2[long_lm] - 1 <= s.max_tokens - (s.left_max + s.middle_max + 2)).all()


@pytest.mark.parametrize("preset", PRESETS)
def test_count_labels_and_layout(datasets, preset):
    ds = datasets["trigger-count", preset]
    s = ds.spec
    trig = ds.trigger_ids
    assert len(set(trig.tolist())) == s.n_triggers and ds.n_classes == s.count_max + 1
    for name, (x, y) in all_splits(ds):
        n = real_len(x)
        np.testing.assert_array_equal(np.isin(x, trig).sum(1), y, err_msg=name)
        assert (n == (s.max_tokens if name in ("train", "test") else n[0])).all()
        if name in ("train", "test"):  # every example has exactly pads_per_example pad positions
            assert (x.shape[1] - n == s.pads_per_example).all(), name
        assert y.min() >= s.count_min and y.max() <= s.count_max
    # shuffled: triggers are not simply the first n tokens
    x, y = ds.train_x, ds.train_y
    front = np.array([np.isin(r[:k], trig).all() for r, k in zip(x, y)])
    mid = (y > 2) & (y < s.max_tokens - 2)
    assert front[mid].mean() < 0.01


def test_paper_spec_values():
    s1, s2 = st.get_spec("trigger-distance", "paper"), st.get_spec("trigger-count", "paper")
    assert (s1.vocab_size, s1.left_max, s1.middle_max, s1.right_max, s1.max_tokens, s1.seq_len, s1.n_examples,
            s1.train_frac, s1.seed, s1.n_classes) == (574, 25, 70, 25, 120, 128, 100_000, 0.7, 42, 72)
    assert (s2.n_triggers, s2.count_min, s2.count_max, s2.max_tokens, s2.n_examples, s2.n_classes) == \
        (30, 0, 100, 120, 50_000, 101)
    c = st.get_spec("trigger-distance", "cpu")
    assert (c.vocab_size, c.left_max, c.middle_max, c.right_max, c.max_tokens, c.n_examples) == (120, 8, 24, 8, 48,
                                                                                              20_000)


def test_filler_includes_triggers_keeps_planted_label():
    ds = st.generate(st.get_spec("trigger-distance", "smoke", vocab_size=6, filler_includes_triggers=True))
    w1, w2 = ds.trigger_ids
    x, y = ds.train_x, ds.train_y
    assert ((x == w1).sum(1) > 1).any(), "small vocab + triggers in filler must give ambiguous rows"
    for r, lab in zip(x, y):   # the planted pair is one of the (w1, w2) pairs at distance y
        i = np.flatnonzero(r == w1)
        assert any(j < len(r) and r[j] == w2 for j in i + lab)
    ds0 = st.generate(st.get_spec("trigger-distance", "smoke", vocab_size=6))
    distance_labels(ds0.train_x, *ds0.trigger_ids)   # default: each trigger exactly once


# ------------------------------------------------------------------ determinism, dedup, splits
def test_deterministic_and_seed_sensitive():
    for task in st.TASKS:
        a, b = (st.generate(st.get_spec(task, "smoke")) for _ in range(2))
        assert a.hash == b.hash
        for (name, (xa, ya)), (_, (xb, yb)) in zip(all_splits(a), all_splits(b)):
            assert xa.tobytes() == xb.tobytes() and ya.tobytes() == yb.tobytes(), name
        c = st.generate(st.get_spec(task, "smoke", seed=7))
        assert c.hash != a.hash and not np.array_equal(c.train_x[:50], a.train_x[:50])
        # any spec change changes the hash
        assert st.generate(st.get_spec(task, "smoke", extrap_size=99)).hash != a.hash


def test_hash_independent_of_python_hash_seed():
    code = "import synthetic_tasks as st; print(st.generate(st.get_spec('trigger-count','smoke')).hash)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                           env=os.environ | {"PYTHONHASHSEED": s}).stdout.strip() for s in ("1", "2")}
    assert outs == {st.generate(st.get_spec("trigger-count", "smoke")).hash}


def test_golden_hash():
    """Pins the bytes: a change here means datasets are no longer reproducible (bump GENERATOR_VERSION)."""
    assert st.generate(st.get_spec("trigger-distance", "smoke")).hash.startswith("116fc6d4d28c")
    assert st.generate(st.get_spec("trigger-count", "smoke")).hash.startswith("a14bcfa529c2")
    # the authors' Task 1 sampling (each segment drawn without replacement), pinned with the full argsort it had
    # before `_sample_without_replacement` sorted only the first k
    authors = st.get_spec("trigger-distance", "smoke", sampling="authors", filler_includes_triggers=True)
    assert st.generate(authors).hash.startswith("e23fccd315f4")


@pytest.mark.parametrize("task", list(st.TASKS))
def test_train_test_disjoint_no_duplicates(datasets, task):
    ds = datasets[task, "cpu"]
    rows = lambda x: {r.tobytes() for r in x}   # noqa: E731
    tr, te = rows(ds.train_x), rows(ds.test_x)
    assert len(tr) == len(ds.train_x) and len(te) == len(ds.test_x) and not tr & te
    n = len(ds.train_y) + len(ds.test_y)
    assert n == ds.spec.n_examples - ds.manifest["n_duplicates_removed"]
    assert len(ds.train_y) == round(0.7 * n)


def test_dedup_removes_exact_duplicates():
    spec = st.get_spec("trigger-distance", "smoke", vocab_size=4, left_max=2, middle_max=2, right_max=2,
                       n_examples=300)   # one filler word: only 8 distinct sequences exist
    ds = st.generate(spec)
    n = len(ds.train_y) + len(ds.test_y)
    assert n == 8 and ds.manifest["n_duplicates_removed"] == 292
    assert not {r.tobytes() for r in ds.train_x} & {r.tobytes() for r in ds.test_x}
    x = np.array([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]])
    dx, dy, k = generators.dedup(x, np.arange(5))
    assert k == 2 and dx.tolist() == [[1, 2], [3, 4], [5, 6]] and dy.tolist() == [0, 1, 3]


# ------------------------------------------------------------------ extrapolation splits
@pytest.mark.parametrize("task", list(st.TASKS))
def test_extrapolation_splits(datasets, task):
    ds = datasets[task, "cpu"]
    s = ds.spec
    names = [f"len{f:g}x" for f in s.extrap_factors] + (["shifted"] if task == "trigger-distance" else [])
    assert list(ds.extrap) == names
    lo, hi = (s.middle_min + 1, s.middle_max + 1) if task == "trigger-distance" else (s.count_min, s.count_max)
    for name, (x, y) in ds.extrap.items():
        n = real_len(x)
        assert x.shape[1] > s.seq_len and (n > s.max_tokens).all(), name
        assert y.min() >= lo and y.max() <= hi and len(y) > 0.95 * s.extrap_size
        assert len(np.unique(y)) > (hi - lo) // 2, "labels should cover the training range"
    assert ds.extrap["len2x"][0].shape[1] == 2 * s.seq_len and (real_len(ds.extrap["len2x"][0]) == 2 * s.max_tokens).all()
    if task == "trigger-distance":
        p1, p2, _ = distance_labels(ds.extrap["shifted"][0], *ds.trigger_ids)
        assert (p1 >= s.max_tokens).all()
        p1, _, _ = distance_labels(ds.extrap["len2x"][0], *ds.trigger_ids)
        assert p1.max() > s.left_max + s.max_tokens // 2, "extra length must reach the left context"


# ------------------------------------------------------------------ cache
def test_cache_reuse_and_manifest(tmp_path, monkeypatch):
    calls = []
    real = generators.generate
    monkeypatch.setattr(generators, "generate", lambda spec: calls.append(1) or real(spec))
    spec = st.get_spec("trigger-distance", "smoke")
    a = st.load_or_generate(spec, tmp_path)
    assert a.path == str(tmp_path / f"trigger-distance-{cache.spec_key(spec)[:12]}")
    mtime = os.stat(os.path.join(a.path, "data.npz")).st_mtime_ns
    b = st.load_or_generate(spec, tmp_path)
    assert len(calls) == 1 and os.stat(os.path.join(a.path, "data.npz")).st_mtime_ns == mtime
    assert b.hash == a.hash and b.spec == spec and np.array_equal(a.test_x, b.test_x)
    assert b.train_x.dtype == np.int64 and list(b.extrap) == list(a.extrap)
    m = b.manifest
    assert m["hash"] == a.hash and m["trigger_ids"] == a.trigger_ids.tolist() and m["generator_version"]
    assert m["splits"]["train"]["label_hist"] == np.bincount(a.train_y, minlength=a.n_classes).tolist()
    assert {"created", "spec", "n_duplicates_removed"} <= set(m)
    st.load_or_generate(st.get_spec("trigger-distance", "smoke", seed=1), tmp_path)
    assert len(calls) == 2 and len(os.listdir(tmp_path)) == 2
    monkeypatch.setenv("PELAB_DATA", str(tmp_path / "env"))
    assert st.load_or_generate(spec).path.startswith(str(tmp_path / "env"))


@pytest.mark.parametrize("exc", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_cache_write_is_atomic(tmp_path, monkeypatch, exc):
    def boom(file, **arrays):
        with open(file, "wb") as f:
            f.write(b"half")
        raise exc
    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(type(exc)):
        st.load_or_generate(st.get_spec("trigger-count", "smoke"), tmp_path)
    assert os.listdir(tmp_path) == []


def test_corrupt_cache_detected(tmp_path):
    spec = st.get_spec("trigger-count", "smoke")
    ds = st.load_or_generate(spec, tmp_path)
    f = os.path.join(ds.path, "data.npz")
    with np.load(f) as z:
        arrays = dict(z)
    arrays["test_y"][0] += 1                       # silently wrong label
    np.savez_compressed(f, **arrays)
    with pytest.raises(st.CacheError, match="hash"):
        st.load_or_generate(spec, tmp_path, strict=True)
    with pytest.warns(UserWarning, match="regenerating"):
        fixed = st.load_or_generate(spec, tmp_path)
    assert fixed.hash == ds.hash and st.load_dataset(ds.path).hash == ds.hash
    with open(f, "wb") as fh:                      # truncated file
        fh.write(b"PK\x03\x04 not a zip")
    with pytest.raises(st.CacheError, match="unreadable"):
        st.load_dataset(ds.path)


# ------------------------------------------------------------------ validation
BAD = [
    ("trigger-distance", "paper", dict(middle_max=200), "middle_max"),
    ("trigger-distance", "cpu", dict(left_min=9), "left_min"),
    ("trigger-distance", "cpu", dict(middle_min=-1), "middle_min"),
    ("trigger-distance", "cpu", dict(right_min=5, right_max=2), "right_min"),
    ("trigger-distance", "cpu", dict(vocab_size=3), "vocab_size"),
    ("trigger-distance", "cpu", dict(seq_len=40), "seq_len"),
    ("trigger-distance", "cpu", dict(n_examples=0), "n_examples"),
    ("trigger-distance", "cpu", dict(n_examples=-5), "n_examples"),
    ("trigger-distance", "cpu", dict(n_examples=1.5), "n_examples"),
    ("trigger-distance", "cpu", dict(train_frac=1.0), "train_frac"),
    ("trigger-distance", "cpu", dict(train_frac=0), "train_frac"),
    ("trigger-distance", "cpu", dict(extrap_size=-1), "extrap_size"),
    ("trigger-distance", "cpu", dict(extrap_factors=(0.5, 2)), "extrap_factors"),
    ("trigger-distance", "cpu", dict(shift_factor=1.1), "shift_factor"),
    ("trigger-distance", "cpu", dict(filler_includes_triggers="yes"), "filler_includes_triggers"),
    ("trigger-distance", "cpu", dict(n_triggers=3), "n_triggers"),          # not a Task 1 field
    ("trigger-count", "cpu", dict(n_triggers=200), "n_triggers"),
    ("trigger-count", "cpu", dict(n_triggers=0), "n_triggers"),
    ("trigger-count", "cpu", dict(count_max=60), "count_max"),
    ("trigger-count", "cpu", dict(count_min=5, count_max=3), "count_min"),
    ("trigger-count", "cpu", dict(max_tokens=0), "max_tokens"),
    ("trigger-count", "cpu", dict(seed=-1), "seed"),
    ("trigger-count", "gpu", {}, "preset"),
    ("trigger-sum", "cpu", {}, "task"),
]


@pytest.mark.parametrize("task,preset,kw,field", BAD, ids=[f"{b[0]}-{b[3]}-{i}" for i, b in enumerate(BAD)])
def test_bad_spec_names_field(task, preset, kw, field):
    with pytest.raises(ValueError) as e:
        st.get_spec(task, preset, **kw)
    msg = str(e.value)
    assert msg.startswith(f"{field}=") and ("must" in msg or "cannot" in msg or "choose" in msg or "not a field" in msg)


def test_spec_frozen_and_roundtrip():
    s = st.get_spec("trigger-distance", "cpu", extrap_factors=[1.5, 3])
    assert s.extrap_factors == (1.5, 3)
    with pytest.raises(AttributeError):
        s.seed = 1
    assert st.spec_from_dict(s.to_dict()) == s


def test_decode():
    ds = st.generate(st.get_spec("trigger-distance", "smoke"))
    w1, w2 = ds.trigger_ids
    row = np.array([5, w1, 7, w2, 0, 0])
    assert ds.decode(row) == f"w5 [T:w{w1}] w7 [T:w{w2}]"
