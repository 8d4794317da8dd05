"""Task specs (frozen, validated dataclasses), presets and `get_spec`.

The dataclass defaults are the `paper` preset; `cpu` and `smoke` override some of them.
Every invalid value raises `ValueError` naming the field and the allowed range.
"""
import dataclasses
import json
import math
from dataclasses import dataclass

PAD = 0


def _fail(field, value, why):
    raise ValueError(f"{field}={value!r} {why}")


@dataclass(frozen=True)
class _Spec:
    """Fields shared by both tasks."""

    def __post_init__(self):
        if isinstance(self.extrap_factors, list):
            object.__setattr__(self, "extrap_factors", tuple(self.extrap_factors))
        self._check_types()
        if self.preset not in PRESETS:
            _fail("preset", self.preset, f"is unknown; choose one of {sorted(PRESETS)}")
        if self.seed < 0:
            _fail("seed", self.seed, "must be >= 0")
        if self.max_tokens < 1:
            _fail("max_tokens", self.max_tokens, "must be >= 1")
        if self.seq_len < self.max_tokens:
            _fail("seq_len", self.seq_len, f"must be >= max_tokens={self.max_tokens} (sequences are right-padded)")
        if self.n_examples < 2:
            _fail("n_examples", self.n_examples, "must be >= 2 (at least one train and one test example)")
        if not 0.0 < self.train_frac < 1.0:
            _fail("train_frac", self.train_frac, "must be strictly between 0 and 1")
        if self.extrap_size < 0:
            _fail("extrap_size", self.extrap_size, "must be >= 0 (0 = no extrapolation splits)")
        for f in self.extrap_factors:
            if not 1.0 < f <= 16.0:
                _fail("extrap_factors", self.extrap_factors, "must all lie in (1, 16] (length relative to training)")
        if len(set(self.extrap_factors)) != len(self.extrap_factors):
            _fail("extrap_factors", self.extrap_factors, "must not repeat a factor")
        self._validate()

    def _check_types(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type is int and (not isinstance(v, int) or isinstance(v, bool)):
                _fail(f.name, v, "must be an integer")
            if f.type is float and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)):
                _fail(f.name, v, "must be a finite number")
            if f.type is bool and not isinstance(v, bool):
                _fail(f.name, v, "must be true or false")
            if f.type is str and not isinstance(v, str):
                _fail(f.name, v, "must be a string")
            if f.type is tuple and not (isinstance(v, tuple) and all(
                    isinstance(e, (int, float)) and not isinstance(e, bool) for e in v)):
                _fail(f.name, v, "must be a list of numbers")

    def _range(self, name, lo=0):
        """Check `name_min` >= lo and `name_min` <= `name_max`."""
        a, b = getattr(self, f"{name}_min"), getattr(self, f"{name}_max")
        if a < lo:
            _fail(f"{name}_min", a, f"must be >= {lo}")
        if a > b:
            _fail(f"{name}_min", a, f"must be <= {name}_max={b}")

    @property
    def train_len(self):
        """Longest real (non-pad) length seen in training."""
        return self.max_tokens

    def extrap_lengths(self, factor):
        """(real tokens, padded length) of the extrapolation split at `factor`."""
        n = math.ceil(factor * self.max_tokens)
        return n, max(n, math.ceil(factor * self.seq_len))

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["extrap_factors"] = list(self.extrap_factors)
        return d

    def to_json(self):
        """Canonical JSON (sorted keys, no spaces): the input of the spec/content hashes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class TriggerDistanceSpec(_Spec):
    """Task 1: `left + [w1] + middle + [w2] + right`, label = len(middle) + 1 = pos(w2) - pos(w1)."""
    task: str = "trigger-distance"
    preset: str = "paper"
    seed: int = 42
    vocab_size: int = 574                  # ids incl. PAD=0; words are 1..vocab_size-1
    left_min: int = 1
    left_max: int = 25
    middle_min: int = 1
    middle_max: int = 70
    right_min: int = 1
    right_max: int = 25
    max_tokens: int = 120                  # truncation length (only `right` is cut)
    seq_len: int = 128                     # padded length
    n_examples: int = 100_000              # generated, before de-duplication
    train_frac: float = 0.7
    filler_includes_triggers: bool = False  # True = the authors' behaviour (ambiguous labels possible)
    sampling: str = "iid"                  # "authors": the released generator (see SAMPLINGS)
    extrap_factors: tuple = (1.25, 1.5, 2.0)
    shift_factor: float = 2.0              # length of the "shifted" split (pair beyond max_tokens)
    extrap_size: int = 2000                # examples per extrapolation split

    @property
    def n_classes(self):
        return self.middle_max + 2

    def to_dict(self):
        d = super().to_dict()
        if d["sampling"] == "iid":  # added later: left out at its default so existing datasets keep their hashes
            del d["sampling"]
        return d

    def _validate(self):
        if self.task != "trigger-distance":
            _fail("task", self.task, "must be 'trigger-distance' for TriggerDistanceSpec")
        if self.sampling not in SAMPLINGS:
            _fail("sampling", self.sampling, f"is unknown; choose one of {sorted(SAMPLINGS)}")
        if self.sampling == "authors":
            if not self.filler_includes_triggers:
                _fail("filler_includes_triggers", False, "must be true with sampling='authors' (the authors' filler "
                      "is drawn from the whole vocabulary, triggers included); set filler_includes_triggers=true")
            for name in ("left_max", "middle_max", "right_max"):
                if getattr(self, name) > self.vocab_size - 1:
                    _fail(name, getattr(self, name), f"must be <= vocab_size-1={self.vocab_size - 1}: "
                          "sampling='authors' draws a segment's words without replacement")
        if self.vocab_size < 4:
            _fail("vocab_size", self.vocab_size, "must be >= 4 (PAD + 2 triggers + at least 1 filler word)")
        for name in ("left", "middle", "right"):
            self._range(name)
        need = self.left_max + self.middle_max + self.right_min + 2
        if need > self.max_tokens:
            raise ValueError(
                f"middle_max={self.middle_max} cannot fit: left_max+middle_max+right_min+2={need} must be "
                f"<= max_tokens={self.max_tokens}; lower middle_max/left_max or raise max_tokens")
        shifted_need = self.max_tokens + self.middle_max + self.right_min + 2
        if math.ceil(self.shift_factor * self.max_tokens) < shifted_need:
            _fail("shift_factor", self.shift_factor,
                  f"is too small: ceil(shift_factor*max_tokens) must be >= max_tokens+middle_max+right_min+2="
                  f"{shifted_need} so the trigger pair fits beyond the training length")


@dataclass(frozen=True)
class TriggerCountSpec(_Spec):
    """Task 2: n trigger tokens + (max_tokens - n) non-trigger filler, shuffled; label = n."""
    task: str = "trigger-count"
    preset: str = "paper"
    seed: int = 42
    vocab_size: int = 574
    n_triggers: int = 30
    count_min: int = 0
    count_max: int = 100
    max_tokens: int = 120                  # real tokens per example (all examples have this length)
    seq_len: int = 128
    n_examples: int = 50_000
    train_frac: float = 0.7
    extrap_factors: tuple = (1.25, 1.5, 2.0)
    extrap_size: int = 2000

    @property
    def n_classes(self):
        return self.count_max + 1

    @property
    def pads_per_example(self) -> int:
        """Pad positions in every example: all have max_tokens tokens in seq_len positions."""
        return self.seq_len - self.max_tokens

    def _validate(self):
        if self.task != "trigger-count":
            _fail("task", self.task, "must be 'trigger-count' for TriggerCountSpec")
        if self.vocab_size < 3:
            _fail("vocab_size", self.vocab_size, "must be >= 3 (PAD + 1 trigger + 1 filler word)")
        if not 1 <= self.n_triggers <= self.vocab_size - 2:
            _fail("n_triggers", self.n_triggers,
                  f"must be in [1, vocab_size-2={self.vocab_size - 2}] (at least one non-trigger filler word)")
        self._range("count")
        if self.count_max > self.max_tokens:
            _fail("count_max", self.count_max, f"cannot fit: must be <= max_tokens={self.max_tokens}")


TASKS = {"trigger-distance": TriggerDistanceSpec, "trigger-count": TriggerCountSpec}

# Task 1 sampling: how filler words are drawn and how the examples are split.
SAMPLINGS = {
    "iid": "filler drawn with replacement (from the non-trigger words unless filler_includes_triggers); "
           "duplicates removed; the first train_frac of the (random-order) examples train",
    "authors": "the core paper's released generator: each segment's filler drawn without replacement from the "
               "whole vocabulary (triggers included, needs filler_includes_triggers=true); duplicates removed, "
               "then a seeded random permutation before the train_frac split",
}

# preset -> task -> overrides of the dataclass defaults (which are the paper values).
PRESETS = {
    "paper": {"trigger-distance": {}, "trigger-count": {}},
    "cpu": {
        "trigger-distance": dict(vocab_size=120, left_min=1, left_max=8, middle_min=1, middle_max=24, right_min=1,
                                 right_max=8, max_tokens=48, seq_len=48, n_examples=20_000, extrap_size=500),
        "trigger-count": dict(vocab_size=120, n_triggers=30, count_min=0, count_max=32, max_tokens=48, seq_len=48,
                              n_examples=20_000, extrap_size=500),
    },
    "smoke": {
        "trigger-distance": dict(vocab_size=40, left_min=1, left_max=4, middle_min=1, middle_max=14, right_min=1,
                                 right_max=6, max_tokens=24, seq_len=24, n_examples=2_000, extrap_size=100),
        "trigger-count": dict(vocab_size=40, n_triggers=8, count_min=0, count_max=12, max_tokens=24, seq_len=24,
                              n_examples=2_000, extrap_size=100),
    },
}


def get_spec(task, preset="cpu", seed=42, **overrides):
    """Validated spec for `task` at `preset`, with `seed` and any field overridden."""
    if task not in TASKS:
        _fail("task", task, f"is unknown; choose one of {list(TASKS)}")
    if preset not in PRESETS:
        _fail("preset", preset, f"is unknown; choose one of {list(PRESETS)}")
    cls = TASKS[task]
    names = {f.name for f in dataclasses.fields(cls)} - {"task", "preset", "seed"}
    for k in overrides:
        if k not in names:
            _fail(k, overrides[k], f"is not a field of {task}; fields: {sorted(names)}")
    return cls(preset=preset, seed=seed, **(PRESETS[preset][task] | overrides))


def spec_of_task(task):
    """The spec of a run config's task section {"task", "preset", "seed", "overrides"} (preset default: paper)."""
    return get_spec(task.get("task"), preset=task.get("preset", "paper"), seed=task.get("seed", 42),
                    **dict(task.get("overrides") or {}))


def spec_from_dict(d):
    """Inverse of `spec.to_dict()` (validates again)."""
    d = dict(d)
    task = d.get("task")
    if task not in TASKS:
        _fail("task", task, f"is unknown; choose one of {list(TASKS)}")
    names = {f.name for f in dataclasses.fields(TASKS[task])}
    unknown = set(d) - names
    if unknown:
        _fail(sorted(unknown)[0], d[sorted(unknown)[0]], f"is not a field of {task}")
    return TASKS[task](**d)
