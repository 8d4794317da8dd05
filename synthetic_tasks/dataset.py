"""The in-memory `Dataset`."""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Dataset:
    """Generated (or cached) dataset. x arrays: int64 [N, len], PAD = 0, right-padded; y: int64 [N]."""
    spec: object
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    extrap: dict                # name -> (x, y); x may be longer than seq_len
    trigger_ids: np.ndarray     # Task 1: [w1, w2] in order; Task 2: the sorted trigger set
    n_classes: int
    vocab_size: int
    seq_len: int
    hash: str                   # content hash (sha256 hex)
    manifest: dict = field(repr=False)
    path: str | None = None     # cache folder, when loaded from / written to disk

    @classmethod
    def from_parts(cls, spec, triggers, train, test, extrap, digest, manifest, path=None):
        return cls(spec=spec, train_x=train[0], train_y=train[1], test_x=test[0], test_y=test[1], extrap=extrap,
                   trigger_ids=np.asarray(triggers, dtype=np.int64), n_classes=spec.n_classes,
                   vocab_size=spec.vocab_size, seq_len=spec.seq_len, hash=digest, manifest=manifest, path=path)

    @property
    def task(self):
        return self.spec.task

    def splits(self):
        """All splits: train, test, then the extrapolation splits."""
        return {"train": (self.train_x, self.train_y), "test": (self.test_x, self.test_y), **self.extrap}

    def decode(self, row):
        """Words as `w17`, triggers as `[T:w3]`, PAD omitted."""
        trig = set(int(t) for t in self.trigger_ids)
        return " ".join(f"[T:w{t}]" if t in trig else f"w{t}" for t in (int(v) for v in row) if t != 0)
