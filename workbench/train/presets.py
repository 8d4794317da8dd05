"""Training presets as plain configs, and the resolution of a run config from preset + choices + overrides.

A run config is a plain dict (stored as config.json):

    {"preset": "cpu", "tag": None,
     "model": ModelConfig.to_dict(),                          # vocab_size / n_classes / max_len filled from the data
     "task":  {"task": "trigger-distance", "preset": "cpu", "seed": 42, "overrides": {}},   # synthetic_tasks spec
     "train": {"lr", "betas", "weight_decay", "warmup_frac", "schedule", "epochs", "batch_size",
               "eval_batch_size", "seed", "grad_clip", "ignore_label"},
     "fidelity": "pelab"}                                     # the named setting the fields came from

`fidelity` (docs/fidelity.md): "pelab" (default, changes nothing), "authors" (the core paper's released
transformer script) or "authors-mla" (its MLA script) sets explicit model/task/train fields after the preset and
before `sets`, so a single field can still be overridden; the fields, not the name, determine the run (its id).

`--seed` (or `seed=`) sets the training seed (parameter init, dropout, shuffling); the dataset keeps the
preset's data seed (42) so that runs of different seeds share one test set. Change it with `task.seed=...`.
"""
from __future__ import annotations

import copy
import json
from typing import Any, Iterable

TASKS = ("trigger-distance", "trigger-count")
TASK_ALIASES = {"t1": "trigger-distance", "task1": "trigger-distance", "1": "trigger-distance",
                "distance": "trigger-distance", "t2": "trigger-count", "task2": "trigger-count", "2": "trigger-count",
                "count": "trigger-count"}
TRAIN_KEYS = {"lr", "betas", "weight_decay", "warmup_frac", "schedule", "epochs", "batch_size", "eval_batch_size",
              "seed", "grad_clip", "ignore_label"}
TASK_KEYS = {"task", "preset", "seed", "overrides"}

_TRAIN_DEFAULTS = {"betas": [0.98, 0.9], "weight_decay": 1e-5, "warmup_frac": 0.06, "schedule": "cosine",
                   "seed": 42, "grad_clip": None, "eval_batch_size": 1024, "ignore_label": None}

PRESETS: dict[str, dict[str, Any]] = {
    # SPEC section 2: the paper's scale. Needs a GPU (about two days per 100-epoch run on 2 CPU cores).
    "paper": {
        "model": {"arch": "paper", "d_model": 256, "n_heads": 16, "d_ff": 512, "n_layers": 6, "dropout": 0.1,
                  "max_len": 128},
        "task": {"preset": "paper", "seed": 42},
        "train": _TRAIN_DEFAULTS | {"lr": 1e-4, "epochs": 100, "batch_size": 512},
        "by_task": {"trigger-distance": {"train.epochs": 100}, "trigger-count": {"train.epochs": 150}},
        "by_scheme": {"mla": {"train.batch_size": 1024}},
        "doc": "paper scale (SPEC section 2): 6 layers, d_model 256, 16 heads, AdamW 1e-4, 100/150 epochs; GPU",
    },
    # Found by experiment on 2 CPU cores (docs/training.md): every scheme trains in well under 3 minutes,
    # RoPE reaches >= 95 % on Task 1 while NoPE stays near chance.
    "cpu": {
        "model": {"arch": "paper", "d_model": 64, "n_heads": 8, "d_ff": 128, "n_layers": 4, "dropout": 0.0,
                  "max_len": None},
        "task": {"preset": "cpu", "seed": 42},
        "train": _TRAIN_DEFAULTS | {"lr": 3e-3, "epochs": 3, "batch_size": 64},
        "by_task": {"trigger-distance": {"train.epochs": 3}, "trigger-count": {"train.epochs": 4}},
        "by_scheme": {},
        "doc": "scaled down for 2 CPU cores (docs/training.md): 4 layers, d_model 64, 8 heads, no dropout, "
               "cpu data preset, lr 3e-3, batch 64, 3 epochs (Task 2: 4)",
    },
    # For tests: trains in a few seconds on the smoke data preset.
    "smoke": {
        "model": {"arch": "paper", "d_model": 32, "n_heads": 4, "d_ff": 64, "n_layers": 2, "dropout": 0.0,
                  "max_len": None},
        "task": {"preset": "smoke", "seed": 42},
        "train": _TRAIN_DEFAULTS | {"lr": 3e-3, "epochs": 2, "batch_size": 64, "eval_batch_size": 256},
        "by_task": {},
        "by_scheme": {},
        "doc": "a few seconds on CPU, for tests",
    },
}


# The authors' released scripts (SPEC section 7), as explicit fields. "scheme_map" renames a scheme to the PE-Lab
# scheme + kwargs that computes what the authors' code computed under that name ("random" there is a trained
# N(0, 1) table: PE-Lab's `learned`).
_AUTHORS_DATA = {"trigger-distance": {"task.sampling": "authors", "task.filler_includes_triggers": True}}
FIDELITIES: dict[str, dict[str, Any]] = {
    "pelab": {"doc": "PE-Lab's defaults (SPEC section 2): pad mask, masked mean, final LayerNorm, plain loss"},
    "authors": {
        "doc": "the core paper's transformer script: paper arch, no attention pad mask, trained PAD embedding, "
               "mean over all positions, no final LayerNorm, vocab_size outputs, loss and accuracy ignore label 0; "
               "'rope' = RoPE + [sin ; cos] input encoding, ALiBi slopes exp(-h/H); authors' Task 1 data",
        "arch": "paper",
        "sets": {"model.attn_pad_mask": False, "model.pad_trained": True, "model.readout_include_pad": True,
                 "model.final_ln": "none", "model.unembed_vocab": True, "model.activation": "relu",
                 "model.dropout_sites": ["attn_weights", "attn_out", "mlp_out"], "model.attn_bias": True,
                 "train.ignore_label": 0},
        "by_task": _AUTHORS_DATA,
        "scheme_map": {"rope": ("rope+sinusoidal", {"layout": "concat"}), "alibi": ("alibi", {"slopes": "paper"}),
                       "random": ("learned", {})},
    },
    "authors-mla": {
        "doc": "the core paper's MLA script: encoder arch, pad mask, trained absolute position embedding (zero "
               "init), GELU, dropout only in the FFN, no attention biases, final LayerNorm before the masked mean, "
               "vocab_size outputs, plain cross-entropy; MLA with one rotary query shared by all heads, rotary "
               "width d_head, the authors' sin/cos read, score scale 1/sqrt(2 d_head); authors' Task 1 data",
        "arch": "encoder",
        "scheme": "mla",
        "sets": {"model.attn_pad_mask": True, "model.pad_trained": True, "model.readout_include_pad": False,
                 "model.final_ln": "before_pool", "model.unembed_vocab": True, "model.activation": "gelu",
                 "model.dropout_sites": ["mlp_hidden", "mlp_out"], "model.attn_bias": False,
                 "train.ignore_label": None},
        "by_task": _AUTHORS_DATA,
        "by_preset": {"paper": {"train.epochs": 150, "train.batch_size": 1024}},
        "scheme_kwargs": {"shared_rope_q": True, "rope_read": "authors", "d_rope": "d_head",
                          "score_scale_dim": "2 d_head", "input_pe": "learned-zero"},
    },
}


def apply_fidelity(cfg: dict[str, Any], fidelity: str, arch_given: str | None) -> None:
    """Set the fields of the named fidelity on a base config (in place); ValueError on a conflicting choice."""
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity={fidelity!r} is unknown; use one of {list(FIDELITIES)} (docs/fidelity.md)")
    cfg["fidelity"] = fidelity
    f, model = FIDELITIES[fidelity], cfg["model"]
    if "arch" in f:
        if arch_given is not None and arch_given != f["arch"]:
            raise ValueError(f"fidelity={fidelity!r} runs arch={f['arch']!r}, but arch={arch_given!r} was given; "
                             f"drop --arch or use fidelity='pelab'")
        model["arch"] = f["arch"]
    if "scheme" in f and model["scheme"] != f["scheme"]:
        raise ValueError(f"fidelity={fidelity!r} is the authors' {f['scheme']} script, but scheme={model['scheme']!r} "
                         f"was given; use scheme={f['scheme']!r} or fidelity='authors'")
    if model["scheme"] in f.get("scheme_map", {}):
        model["scheme"], kwargs = f["scheme_map"][model["scheme"]]
        model["scheme_kwargs"] = dict(kwargs)
    if "scheme_kwargs" in f:  # sizes given in d_head units resolve with the preset's d_model / n_heads
        d_head = model["d_model"] // model["n_heads"]
        sizes = {"d_head": d_head, "2 d_head": 2 * d_head}
        model["scheme_kwargs"] = {k: sizes.get(v, v) if isinstance(v, str) else v
                                  for k, v in f["scheme_kwargs"].items()}
    rules = list(f.get("sets", {}).items()) + list(f.get("by_task", {}).get(cfg["task"]["task"], {}).items()) \
        + list(f.get("by_preset", {}).get(cfg["preset"], {}).items())
    for key, value in rules:
        set_dotted(cfg, key, copy.deepcopy(value))


def canonical_task(task: str) -> str:
    return TASK_ALIASES.get(str(task).lower(), task)


def parse_value(text: str) -> Any:
    """`--set` values: JSON (5, 1e-3, [1, 2], {"a": 1}, true, null), Python's True/False/None, else the string."""
    py = {"True": True, "False": False, "None": None, "none": None}
    if text in py:
        return py[text]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_sets(items: Iterable[str]) -> list[tuple[str, Any]]:
    """["train.epochs=5", "model.scheme_kwargs.rope_heads=[1,0,0,0]"] -> [(dotted key, value), ...]."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. train.epochs=5")
        out.append((key.strip(), parse_value(value.strip())))
    return out


def set_dotted(cfg: dict[str, Any], key: str, value: Any) -> None:
    """Set `cfg[a][b][c] = value` for key "a.b.c". Task keys other than task/preset/seed/overrides go into
    task.overrides (e.g. `task.middle_max=24`)."""
    parts = key.split(".")
    if parts[0] not in ("model", "task", "train") or len(parts) < 2:
        raise ValueError(f"override {key!r}: keys start with model., task. or train. (e.g. train.epochs)")
    if parts[0] == "task" and parts[1] not in TASK_KEYS:
        parts = ["task", "overrides"] + parts[1:]
    if parts[0] == "train" and parts[1] not in TRAIN_KEYS:
        raise ValueError(f"override {key!r}: unknown train key {parts[1]!r}; known: {sorted(TRAIN_KEYS)}")
    node = cfg
    for p in parts[:-1]:
        if node.get(p) is None:
            node[p] = {}
        if not isinstance(node[p], dict):
            raise ValueError(f"override {key!r}: {p!r} is not a section")
        node = node[p]
    node[parts[-1]] = value


def flatten_sets(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """{"model": {"n_layers": 2}, "train.epochs": 3} -> [("model.n_layers", 2), ("train.epochs", 3)]."""
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        mergeable = "." not in key or key in ("model.scheme_kwargs", "task.overrides")
        if isinstance(v, dict) and mergeable:
            out += flatten_sets(v, key + ".")
        else:
            out.append((key, v))
    return out


def base_config(preset: str = "cpu", scheme: str | None = None, task: str = "trigger-distance",
                arch: str | None = None, seed: int | None = None,
                sets: Iterable[tuple[str, Any]] | Iterable[str] = (), tag: str | None = None,
                fidelity: str = "pelab") -> dict[str, Any]:
    """The run config before the data fills in vocab_size / n_classes / max_len (no I/O). `scheme` None means
    the fidelity's scheme (mla for "authors-mla") or rope."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; presets: {list(PRESETS)}")
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity={fidelity!r} is unknown; use one of {list(FIDELITIES)} (docs/fidelity.md)")
    scheme = scheme or FIDELITIES[fidelity].get("scheme", "rope")
    p = PRESETS[preset]
    task = canonical_task(task)
    cfg: dict[str, Any] = {"preset": preset, "tag": tag, "model": copy.deepcopy(p["model"]),
                           "task": copy.deepcopy(p["task"]) | {"task": task, "overrides": {}},
                           "train": copy.deepcopy(p["train"])}
    cfg["model"]["scheme"] = scheme
    cfg["model"]["scheme_kwargs"] = {}
    if arch is not None:
        cfg["model"]["arch"] = arch
    for key, value in list(p["by_task"].get(task, {}).items()) + list(p["by_scheme"].get(scheme, {}).items()):
        set_dotted(cfg, key, value)
    apply_fidelity(cfg, fidelity, arch)
    if seed is not None:
        cfg["train"]["seed"] = int(seed)
    sets = [parse_sets([s])[0] if isinstance(s, str) else s for s in sets]
    for key, value in sets:
        set_dotted(cfg, key, value)
    if not any(k == "model.seed" for k, _ in sets):
        cfg["model"]["seed"] = cfg["train"]["seed"]  # parameter init follows the training seed
    cfg["task"]["task"] = canonical_task(cfg["task"]["task"])
    return cfg


def resolve_config(preset: str = "cpu", scheme: str | None = None, task: str = "trigger-distance",
                   arch: str | None = None, seed: int | None = None,
                   sets: Iterable[tuple[str, Any]] | Iterable[str] = (), tag: str | None = None,
                   store=None, fidelity: str = "pelab") -> dict[str, Any]:
    """Fully resolved run config: preset, then scheme/task/arch/seed, then per-task and per-scheme preset
    rules, then the fidelity's fields, then `sets` (dotted overrides, later wins); vocab_size, n_classes and
    (when None) max_len come from the task spec. With a `store`, the dataset is also generated or loaded from
    its cache; without one nothing is read or written. The model section is validated."""
    from synthetic_tasks import get_spec
    from workbench.model import ModelConfig

    cfg = base_config(preset, scheme, task, arch, seed, sets, tag, fidelity)
    t = cfg["task"]
    ds = store.load_task(t) if store is not None else get_spec(t["task"], preset=t.get("preset", "paper"),
                                                             seed=t.get("seed", 42), **dict(t.get("overrides") or {}))
    model = cfg["model"]
    model["vocab_size"], model["n_classes"] = int(ds.vocab_size), int(ds.n_classes)
    if model.get("max_len") is None:
        model["max_len"] = int(ds.seq_len)
    if model["max_len"] < ds.seq_len:
        raise ValueError(f"model.max_len={model['max_len']} is shorter than the data's seq_len={ds.seq_len}")
    cfg["model"] = ModelConfig.from_dict(model).to_dict()
    return finish_train_section(cfg)


def finish_train_section(cfg: dict[str, Any]) -> dict[str, Any]:
    t = cfg["train"]
    unknown = set(t) - TRAIN_KEYS
    if unknown:
        raise ValueError(f"unknown train keys {sorted(unknown)}; known: {sorted(TRAIN_KEYS)}")
    checks = [(t["lr"] > 0, "lr must be > 0"), (int(t["epochs"]) >= 1, "epochs must be >= 1"),
              (int(t["batch_size"]) >= 1, "batch_size must be >= 1"),
              (0 <= t["warmup_frac"] < 1, "warmup_frac must be in [0, 1)"),
              (t["schedule"] in ("cosine", "constant"), "schedule must be 'cosine' or 'constant'"),
              (len(t["betas"]) == 2, "betas must be two numbers"),
              (t.get("ignore_label") is None or (isinstance(t["ignore_label"], int)
                                                 and not isinstance(t["ignore_label"], bool)),
               "ignore_label must be an integer label or null")]
    for ok, msg in checks:
        if not ok:
            raise ValueError(f"train config: {msg} (got {t})")
    t["epochs"], t["batch_size"], t["seed"] = int(t["epochs"]), int(t["batch_size"]), int(t["seed"])
    t["eval_batch_size"] = int(t.get("eval_batch_size") or t["batch_size"])
    t["betas"] = [float(b) for b in t["betas"]]
    t.setdefault("ignore_label", None)
    cfg.setdefault("fidelity", "pelab")
    return cfg
