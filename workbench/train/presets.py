"""Training presets as plain configs, and the resolution of a run config from preset + choices + overrides.

A run config is a plain dict (stored as config.json):

    {"preset": "cpu", "tag": None,
     "model": ModelConfig.to_dict(),                          # vocab_size / n_classes / max_len filled from the data
     "task":  {"task": "trigger-distance", "preset": "cpu", "seed": 42, "overrides": {}},   # synthetic_tasks spec
     "train": {"lr", "betas", "weight_decay", "warmup_frac", "schedule", "epochs", "batch_size",
               "eval_batch_size", "seed", "grad_clip", "batching", "ignore_label", "fused_attention", "train_eval"},
     "fidelity": "pelab"}                                     # the named setting the fields came from

`fidelity` (docs/fidelity.md): "pelab" (default, changes nothing), "authors" (the core paper's released
transformer script) or "authors-mla" (its MLA script) sets explicit model/task/train fields after the preset and
before `sets`, so a single field can still be overridden; the fields, not the name, determine the run (its id).

`--seed` (or `seed=`) sets the training seed (parameter init, dropout, shuffling); the dataset keeps the
preset's data seed (42) so that runs of different seeds share one test set. Change it with `task.seed=...`.

`validate_config` checks every field's JSON type and range (model and train through
`workbench.model.config.check_fields`, task through `synthetic_tasks.get_spec`) and refuses configurations whose
estimated memory exceeds what the machine has available -- before anything is written to disk.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, fields
from typing import Any, Iterable

from workbench.model.config import MODEL_CHOICES, MODEL_RANGES, Range, check_fields

TASKS = ("trigger-distance", "trigger-count")
TASK_ALIASES = {"t1": "trigger-distance", "task1": "trigger-distance", "1": "trigger-distance",
                "distance": "trigger-distance", "t2": "trigger-count", "task2": "trigger-count", "2": "trigger-count",
                "count": "trigger-count"}


@dataclass
class TrainConfig:
    """The train section's fields and their JSON types: the schema `check_fields` validates against."""

    lr: float
    betas: list[float]
    weight_decay: float
    warmup_frac: float
    schedule: str
    epochs: int
    batch_size: int
    eval_batch_size: int | None  # None: batch_size
    seed: int
    grad_clip: float | None  # None: no clipping
    batching: str = "random"  # random | length (docs/training.md)
    ignore_label: int | None = None  # examples with this label count for nothing (the authors: 0)
    fused_attention: bool = False  # attention dropout inside SDPA in training (docs/training.md); same at p = 0
    train_eval: str = "every"  # the training-subset evaluation after every epoch, or after the "last" only


TRAIN_KEYS = {f.name for f in fields(TrainConfig)}
TRAIN_RANGES = {"lr": Range(0, 10, lo_open=True), "betas": Range(0, 1, hi_open=True), "weight_decay": Range(0, 10),
                "warmup_frac": Range(0, 1, hi_open=True), "epochs": Range(1, 100_000), "batch_size": Range(1, 2**20),
                "eval_batch_size": Range(1, 2**20), "seed": Range(0, 2**63 - 1),
                "grad_clip": Range(0, 1e6, lo_open=True)}
TRAIN_CHOICES = {"schedule": ("cosine", "constant"), "batching": ("random", "length"), "train_eval": ("every", "last")}
MAX_TAG = 64
TASK_KEYS = {"task", "preset", "seed", "overrides"}

_TRAIN_DEFAULTS = {"betas": [0.98, 0.9], "weight_decay": 1e-5, "warmup_frac": 0.06, "schedule": "cosine",
                   "seed": 42, "grad_clip": None, "eval_batch_size": 1024,
                   "batching": "random", "ignore_label": None}

PAPERDATA_EXAMPLES = 14_000  # repro-paperdata: the paper's data generator, this many examples (paper: 100k / 50k)
LADDER = ("repro", "repro-long", "repro-wide", "repro-paperdata", "repro-paperdata-long")  # `repro` first


PRESETS: dict[str, dict[str, Any]] = {
    # docs/paper.md §2: the paper's scale. Needs a GPU (about two days per 100-epoch run on 2 CPU cores).
    "paper": {
        "model": {"arch": "paper", "d_model": 256, "n_heads": 16, "d_ff": 512, "n_layers": 6, "dropout": 0.1,
                  "max_len": 128},
        "task": {"preset": "paper", "seed": 42},
        "train": _TRAIN_DEFAULTS | {"lr": 1e-4, "epochs": 100, "batch_size": 512, "fused_attention": True,
                                    "train_eval": "last"},
        "by_task": {"trigger-distance": {"train.epochs": 100}, "trigger-count": {"train.epochs": 150}},
        "by_scheme": {"mla": {"train.batch_size": 1024}},
        "doc": "paper scale (docs/paper.md §2): 6 layers, d_model 256, 16 heads, AdamW 1e-4, 100/150 epochs; GPU",
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
        "optimiser": "The optimiser (lr, batch, dropout 0) was chosen so that RoPE reaches >= 95 % on Task 1 in 3 "
                     "epochs while NoPE stays near chance (docs/training.md, the `cpu` preset's evidence): it "
                     "favours RoPE, so orders of convergence are not testable here.",
    },
    # The reproduction's preset (issue 13, docs/reproduction.md): the paper's shape (6 layers x 16 heads, paper
    # arch) scaled to 2 CPU cores; optimiser settings found by experiment (docs/training.md, "The repro preset").
    "repro": {
        "model": {"arch": "paper", "d_model": 128, "n_heads": 16, "d_ff": 256, "n_layers": 6, "dropout": 0.0,
                  "max_len": None},
        "task": {"preset": "cpu", "seed": 42},
        "train": _TRAIN_DEFAULTS | {"lr": 1.5e-3, "epochs": 3, "batch_size": 32, "grad_clip": 1.0},
        "by_task": {"trigger-distance": {"train.epochs": 3}, "trigger-count": {"train.epochs": 4}},
        "by_scheme": {},
        "doc": "paper-shaped for 2 CPU cores (docs/training.md): 6 layers x 16 heads, d_model 128, d_ff 256, no "
               "dropout, cpu data, AdamW lr 1.5e-3, batch 32, gradient clipping 1.0, random batches as the paper, "
               "3 epochs (Task 2: 4)",
        "optimiser": "The optimiser (lr, batch, clipping) was tuned on RoPE, Task 1, seed 42 only (docs/training.md): "
                     "it favours RoPE, so orders of convergence are not testable here.",
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
        "optimiser": "The optimiser and epochs are set for tests that train in seconds, not tuned: a `smoke` run "
                     "shows that the code runs, not what a scheme learns.",
    },
}



def _rung(doc: str, model: dict | None = None, task: dict | None = None, by_task: dict | None = None) -> dict:
    """A rung of the scale ladder: `repro` with the given fields changed (one thing moved towards the paper)."""
    p = copy.deepcopy(PRESETS["repro"])
    p["model"].update(model or {})
    p["task"].update(task or {})
    for t, rule in (by_task or {}).items():
        p["by_task"][t] = p["by_task"].get(t, {}) | rule
    p["doc"] = doc
    return p


# The scale ladder (issue 21, docs/reproduction.md#the-scale-ladder): `repro` with one thing moved towards the
# paper's setup, to see which of the reproduction's verdicts depend on the scaled-down preset.
PRESETS["repro-long"] = _rung(
    "scale ladder: `repro` with 4x the epochs (12, Task 2: 16); same model, data and optimiser",
    by_task={"trigger-distance": {"train.epochs": 12}, "trigger-count": {"train.epochs": 16}})
PRESETS["repro-wide"] = _rung(
    "scale ladder: `repro` at the paper's width (d_model 256, d_ff 512, d_head 16); cpu data, 3 epochs (Task 2: 4), "
    "the repro optimiser", model={"d_model": 256, "d_ff": 512})
PRESETS["repro-paperdata"] = _rung(
    f"scale ladder: `repro` on the paper's data (up to 120 tokens, vocab 574; Task 1: 72 labels) subsampled to "
    f"{PAPERDATA_EXAMPLES:,} generated examples (70 % train): about 20 CPU-minutes a run (measured); 3 epochs (Task 2: "
    "4), the repro optimiser", task={"preset": "paper"},
    by_task={t: {"task.n_examples": PAPERDATA_EXAMPLES} for t in ("trigger-distance", "trigger-count")})
PRESETS["repro-paperdata-long"] = _rung(
    "scale ladder: `repro-paperdata` with 4x the epochs (12, Task 2: 16), for the questions `repro-paperdata` left "
    "open (RoPE and NoPE still learning after 3-4 epochs, on both tasks); about 80 CPU-minutes a run on Task 2 "
    "(measured), about 45 on Task 1 (measured: RoPE 2,577 CPU-s)",
    task={"preset": "paper"},
    by_task={"trigger-distance": {"task.n_examples": PAPERDATA_EXAMPLES, "train.epochs": 12},
             "trigger-count": {"task.n_examples": PAPERDATA_EXAMPLES, "train.epochs": 16}})

# Study tier 4 (docs/preregistration.md, "Tier 4"): `repro-long` at twice its epochs, so that a run that learned late
# has a settling window (epochs 12-24) after it; not a ladder rung (one thing moved, the epochs, as `repro-long`).
PRESETS["repro-xlong"] = _rung(
    "`repro-long` with twice the epochs (24, Task 2: 32; 8x `repro`), for study tier 4: Relative on Task 1, whose "
    "tier-3 runs learned late in `repro-long`'s 12; same model, data and optimiser, its cosine schedule over all 24",
    by_task={"trigger-distance": {"train.epochs": 24}, "trigger-count": {"train.epochs": 32}})

# The authors' released scripts (docs/paper.md §7), as explicit fields. "scheme_map" renames a scheme to the PE-Lab
# scheme + kwargs that computes what the authors' code computed under that name ("random" there is a trained
# N(0, 1) table: PE-Lab's `learned`).
_AUTHORS_DATA = {"trigger-distance": {"task.sampling": "authors", "task.filler_includes_triggers": True}}
FIDELITIES: dict[str, dict[str, Any]] = {
    "pelab": {"doc": "PE-Lab's defaults (docs/paper.md §2): pad mask, masked mean, final LayerNorm, plain loss"},
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
        if cfg.get("tag") is None:  # the run keeps the authors' name as its label (run id, variant in tables)
            cfg["tag"] = model["scheme"]
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


def flatten_sets(d: dict[str, Any], prefix: str = "", where: str = "set") -> list[tuple[str, Any]]:
    """{"model": {"n_layers": 2}, "train.epochs": 3} -> [("model.n_layers", 2), ("train.epochs", 3)]. Tables
    under model.scheme_kwargs / task.overrides merge key by key; an empty one (`"model.scheme_kwargs" = {}`)
    clears them."""
    if not isinstance(d, dict):
        raise ValueError(f"{where} = {d!r:.80}: must be a table of dotted keys, e.g. "
                         '{ "train.epochs" = 5, "model.n_layers" = 2 }')
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        mergeable = "." not in key or key in ("model.scheme_kwargs", "task.overrides")
        if isinstance(v, dict) and mergeable and (v or "." not in key):
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
    cfg["train"].update(scheme_train_defaults(scheme))
    for key, value in list(p["by_task"].get(task, {}).items()) + list(p["by_scheme"].get(scheme, {}).items()):
        set_dotted(cfg, key, value)
    apply_fidelity(cfg, fidelity, arch)
    if seed is not None:
        cfg["train"]["seed"] = seed
    sets = [parse_sets([s])[0] if isinstance(s, str) else s for s in sets]
    for key, value in sets:
        set_dotted(cfg, key, value)
    if not any(k == "model.seed" for k, _ in sets):
        cfg["model"]["seed"] = cfg["train"]["seed"]  # parameter init follows the training seed
    cfg["task"]["task"] = canonical_task(cfg["task"]["task"])
    return cfg


def scheme_train_defaults(scheme: str) -> dict[str, Any]:
    """The train fields a scheme declares it needs (`Scheme.train_defaults`); {} for an unknown name (the model
    section's validation names the known schemes)."""
    from workbench.model.pe.registry import get_scheme

    try:
        cls = get_scheme(scheme)
    except ValueError:
        return {}
    return {k: copy.deepcopy(v) for k, (v, _) in cls.train_defaults.items()}


def resolve_config(preset: str = "cpu", scheme: str | None = None, task: str = "trigger-distance",
                   arch: str | None = None, seed: int | None = None,
                   sets: Iterable[tuple[str, Any]] | Iterable[str] = (), tag: str | None = None,
                   store=None, fidelity: str = "pelab") -> dict[str, Any]:
    """Fully resolved run config: preset, then scheme/task/arch/seed, then per-task and per-scheme preset
    rules, then the fidelity's fields, then `sets` (dotted overrides, later wins); vocab_size, n_classes and
    (when None) max_len come from the task spec. With a `store`, the dataset is also generated or loaded from
    its cache; without one nothing is read or written. The model section is validated."""
    from workbench.model import ModelConfig

    cfg = base_config(preset, scheme, task, arch, seed, sets, tag, fidelity)
    validate_config(cfg, partial=True)
    ds = spec = task_spec(cfg["task"])
    n_train = round(spec.train_frac * spec.n_examples)
    if store is not None:
        ds = store.load_task(cfg["task"])
        n_train = len(ds.train_y)
    model = cfg["model"]
    for key, value in (("vocab_size", int(ds.vocab_size)), ("n_classes", int(ds.n_classes))):
        if model.get(key) not in (None, value):  # an override the data would silently replace
            raise ValueError(f"model.{key}={model[key]} is fixed by the dataset ({value}); change the task instead "
                             f"(e.g. task.{key}=...)" if key == "vocab_size" else
                             f"model.{key}={model[key]} is fixed by the dataset ({value}); it follows the task")
        model[key] = value
    if model.get("max_len") is None:
        model["max_len"] = int(ds.seq_len)
    if model["max_len"] < ds.seq_len:
        raise ValueError(f"model.max_len={model['max_len']} is shorter than the data's seq_len={ds.seq_len}")
    cfg["model"] = ModelConfig.from_dict(model).to_dict()
    cfg = finish_train_section(cfg)
    check_memory(cfg, n_train=n_train, seq_len=int(ds.seq_len))
    return cfg


def finish_train_section(cfg: dict[str, Any]) -> dict[str, Any]:
    t = cfg["train"]
    t.setdefault("batching", "random")
    t.setdefault("ignore_label", None)
    t.setdefault("fused_attention", False)
    t.setdefault("train_eval", "every")
    check_fields(t, TrainConfig, "train", TRAIN_RANGES, TRAIN_CHOICES)
    if len(t["betas"]) != 2:
        raise ValueError(f"train.betas={t['betas']!r}: must be two numbers in [0, 1), e.g. [0.9, 0.999]")
    t["eval_batch_size"] = t.get("eval_batch_size") or t["batch_size"]
    t["betas"] = [float(b) for b in t["betas"]]
    cfg.setdefault("fidelity", "pelab")
    return cfg


def validate_config(cfg: Any, partial: bool = False) -> dict[str, Any]:
    """ValueError naming the field, the value and what is allowed, for any malformed part of a run config:
    preset, tag, every train and task field, every model field (types and ranges; `partial`: before the data
    fills vocab_size / n_classes / max_len, so those may be None). Pure: reads and writes nothing."""
    if not isinstance(cfg, dict):
        raise ValueError(f"a run config is an object with model, task and train sections, not {type(cfg).__name__}")
    for section in ("model", "task", "train"):
        if not isinstance(cfg.get(section), dict):
            raise ValueError(f"run config: the {section!r} section must be an object")
    if cfg.get("preset") is not None and cfg["preset"] not in PRESETS:
        raise ValueError(f"preset={cfg['preset']!r} is unknown; presets: {list(PRESETS)}")
    tag = cfg.get("tag")
    if tag is not None and not (isinstance(tag, str) and 0 < len(tag) <= MAX_TAG and any(c.isalnum() for c in tag)):
        raise ValueError(f"--tag {str(tag)[:40]!r}{'...' if len(str(tag)) > 40 else ''} ({len(str(tag))} characters):"
                         f" a tag is 1 to {MAX_TAG} characters with at least one letter or digit")
    check_fields(cfg["train"], TrainConfig, "train", TRAIN_RANGES, TRAIN_CHOICES)
    if len(cfg["train"]["betas"]) != 2:
        raise ValueError(f"train.betas={cfg['train']['betas']!r}: must be two numbers in [0, 1), e.g. [0.9, 0.999]")
    from workbench.model import ModelConfig

    filled = ("vocab_size", "n_classes", "max_len") if partial else ()
    check_fields({k: v for k, v in cfg["model"].items() if not (k in filled and v is None)}, ModelConfig, "model",
                 MODEL_RANGES, MODEL_CHOICES)
    check_dataset_memory(task_spec(cfg["task"]))
    return cfg


def check_dataset_memory(spec) -> None:
    """ValueError (with the estimate) when generating the dataset of a synthetic_tasks spec would need more memory
    than is available: int64 rows of n_examples x seq_len, about four copies while generating and de-duplicating."""
    need = 4 * 8 * spec.n_examples * spec.seq_len
    _refuse_if_too_big(need, f"generating the dataset ({spec.n_examples} examples x seq_len {spec.seq_len})",
                       "lower task.n_examples or task.seq_len")


def task_spec(task: dict[str, Any]):
    """The validated synthetic_tasks spec of a run config's task section (ValueError naming `task.<field>`)."""
    from synthetic_tasks import spec_of_task

    unknown = set(task) - TASK_KEYS
    if unknown:
        raise ValueError(f"unknown task keys {sorted(unknown)}; known: {sorted(TASK_KEYS)} (dataset fields go in "
                         "task.overrides, e.g. task.n_examples=1000)")
    overrides = task.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise ValueError(f"task.overrides={overrides!r:.80}: must be an object of dataset fields")
    try:
        return spec_of_task(task)
    except ValueError as e:
        raise ValueError(f"task.{e}") from None
    except TypeError as e:
        raise ValueError(f"task: {e}") from None


def estimate_memory(cfg: dict[str, Any], n_train: int, seq_len: int) -> tuple[float, float, float]:
    """(total bytes, parameters, activation bytes) to train `cfg`: fp32 weights + gradients + two AdamW moments
    (16 bytes per parameter), plus the activations one training batch keeps for backward (per token and layer
    about 10 d_model + 2 d_ff floats, and 2 x heads x seq_len attention weights without the SDPA fast path),
    plus the data as int64. An order-of-magnitude estimate, not a measurement."""
    m, t = cfg["model"], cfg["train"]
    d, ff, L, H = m["d_model"], m["d_ff"], m["n_layers"], m["n_heads"]
    params = m["vocab_size"] * d + L * (4 * d * d + 2 * d * ff + 9 * d) + d * m["n_classes"] + m["max_len"] * d
    attn = 0 if m.get("use_sdpa", True) else 2 * H * seq_len
    act = 4.0 * t["batch_size"] * seq_len * L * (10 * d + 2 * ff + attn)
    evals = 4.0 * (t.get("eval_batch_size") or t["batch_size"]) * seq_len * (6 * d + ff + 2 * H * seq_len)
    return 16.0 * params + act + evals + 8.0 * n_train * seq_len, float(params), act


def _refuse_if_too_big(need: float, what: str, fix: str) -> None:
    import psutil

    avail = psutil.virtual_memory().available
    if need > avail:
        raise ValueError(f"{what} needs about {need / 1e9:.3g} GB of memory but this machine has "
                         f"{avail / 1e9:.3g} GB available; {fix}")


def check_memory(cfg: dict[str, Any], n_train: int, seq_len: int) -> None:
    """ValueError (with the estimate) when training `cfg` would need more memory than is available."""
    need, params, act = estimate_memory(cfg, n_train, seq_len)
    m, t = cfg["model"], cfg["train"]
    _refuse_if_too_big(need, f"training this model ({params / 1e6:.4g} M parameters: model.d_model={m['d_model']}, "
                       f"n_layers={m['n_layers']}, d_ff={m['d_ff']}; activations {act / 1e9:.3g} GB at "
                       f"train.batch_size={t['batch_size']}, seq_len {seq_len})",
                       "make the model smaller or lower train.batch_size")


CUDA_CONTEXT_BYTES = 0.6e9  # the CUDA context and cuBLAS / cuDNN workspaces of one process (not in the allocator)


def estimate_gpu_memory(cfg: dict[str, Any]) -> float:
    """Bytes of GPU memory one process needs to train `cfg` on CUDA: the weights-gradients-moments of
    `estimate_memory` plus bf16 weight copies (2 bytes per parameter under autocast), the larger of the
    training activations and the evaluation batch's, the data on the device (int64 train + test rows),
    the CUDA context, and 25 % for the caching allocator's fragmentation. An upper estimate: the `gpu` test
    holds it against torch.cuda.max_memory_allocated."""
    spec = task_spec(cfg["task"])
    m, t = cfg["model"], cfg["train"]
    seq_len, d, ff, L, H = spec.seq_len, m["d_model"], m["d_ff"], m["n_layers"], m["n_heads"]
    params = m["vocab_size"] * d + L * (4 * d * d + 2 * d * ff + 9 * d) + d * m["n_classes"] + m["max_len"] * d
    attn = 0 if m.get("use_sdpa", True) else 2 * H * seq_len
    act = 4.0 * t["batch_size"] * seq_len * L * (10 * d + 2 * ff + attn)
    evals = 4.0 * (t.get("eval_batch_size") or t["batch_size"]) * seq_len * (6 * d + ff + 2 * H * seq_len)
    data = 8.0 * spec.n_examples * seq_len
    return 1.25 * (18.0 * params + max(act, evals) + data) + CUDA_CONTEXT_BYTES


def gpu_free_bytes(device) -> float:
    """Free memory of a CUDA device now (torch.cuda.mem_get_info), in bytes."""
    import torch

    return float(torch.cuda.mem_get_info(device)[0])


def check_gpu_memory(cfg: dict[str, Any], device) -> None:
    """ValueError (with the estimate) when `device` is a CUDA device without room for training `cfg`."""
    if getattr(device, "type", str(device).split(":")[0]) != "cuda":
        return
    need, free = estimate_gpu_memory(cfg), gpu_free_bytes(device)
    if need > free:
        t = cfg["train"]
        raise ValueError(f"training this run on {device} needs about {need / 1e9:.3g} GB of GPU memory but "
                         f"{free / 1e9:.3g} GB are free; lower train.batch_size (now {t['batch_size']}) or "
                         "train.eval_batch_size, or train fewer runs at once (--workers)")


def gpu_slots(configs: list[dict[str, Any]], device) -> int:
    """How many of `configs` fit on the CUDA `device` at once (free memory / the largest estimate)."""
    need = max(estimate_gpu_memory(c) for c in configs)
    return int(gpu_free_bytes(device) // need)


def preset_task_spec(preset: str, task: str):
    """(the task spec, epochs) a `preset` trains `task` with: its data preset and its per-task rules
    (`task.n_examples`, `train.epochs`), read from PRESETS without building a config or touching data."""
    from synthetic_tasks import get_spec

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; presets: {list(PRESETS)}")
    q = PRESETS[preset]
    rule = q["by_task"].get(task, {})
    spec = get_spec(task, q["task"]["preset"], **({"n_examples": rule["task.n_examples"]}
                                                  if "task.n_examples" in rule else {}))
    return spec, rule.get("train.epochs", q["train"]["epochs"])


@dataclass(frozen=True)
class Disclaimer:
    """What differs from the paper's setup at a preset, said before its results (issue 21): a bold headline, the
    model line after it, then one point a line; inline markdown only (`code`, *emphasis*)."""

    headline: str
    lead: str
    points: tuple[str, ...]

    def markdown(self) -> str:
        """The box as a markdown quote (README, COMPARISON.md, the dashboard, the notebooks)."""
        return "\n".join([f"> **{self.headline}** {self.lead}", ">", *[f"> - {p}" for p in self.points]])


def _against_paper(pairs: list[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
    """(what matches the paper, what differs, each as "ours (paper theirs)") of (ours, the paper's, how ours reads)
    pairs: the sides are compared as written."""
    same = [text for ours, theirs, text in pairs if ours == theirs]
    return same, [f"{text} (paper {theirs})" for ours, theirs, text in pairs if ours != theirs]


def _percent(x: float) -> str:
    """A share in percent: one decimal, two significant digits below 0.1 % (a smoke run's 0.04 %, not 0.0 %)."""
    return f"{x:.1f}" if x >= 0.1 else f"{x:.2g}"


# The paper's word for its model against what its code does (docs/fidelity.md, row 1), at every preset.
ATTENTION_NOTE = ("The paper calls its model a \"6-layer Transformer decoder\"; the authors' released code attends "
                  "bidirectionally (no causal mask), and so do the `paper` arch and the authors' settings most claims "
                  "are judged on. The `decoder` rows (causal, read at the last token) are PE-Lab's reading of the "
                  "word; there the causal mask itself carries position (docs/fidelity.md, row 1).")


def disclaimer(preset: str = "repro") -> Disclaimer:
    """The box that opens every report of results at `preset` (issue 21): how the preset differs from the
    paper's setup (the model's shape and width, dropout, optimiser; per task labels, length, vocabulary, epochs and
    the share of the paper's data exposure = train examples x epochs), each named "like the paper" only where it
    is, how its optimiser was chosen, and what a verdict at it can and cannot say; at `paper` (the paper's setup on
    a GPU) what differs there: the GPU's numerics and the few seeds."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; presets: {list(PRESETS)}")
    p, paper = PRESETS[preset], PRESETS["paper"]

    def exposure(name: str, task: str) -> tuple[int, int, object]:
        spec, epochs = preset_task_spec(name, task)
        return round(spec.n_examples * spec.train_frac) * epochs, epochs, spec

    lines = []
    for task, name in (("trigger-distance", "Task 1"), ("trigger-count", "Task 2")):
        (ours, ep, s), (theirs, pep, ps) = exposure(preset, task), exposure("paper", task)
        same_len = (s.max_tokens, s.seq_len) == (ps.max_tokens, ps.seq_len)
        if task == "trigger-count":  # every Task 2 example has max_tokens tokens
            length = (f"{s.max_tokens} tokens in {s.seq_len} positions ({s.pads_per_example} pads an example"
                      + ("" if same_len else f"; paper {ps.max_tokens} in {ps.seq_len}: {ps.pads_per_example}") + ")")
        else:
            length = (f"up to {s.max_tokens} tokens in {s.seq_len} positions"
                      + ("" if same_len else f" (paper {ps.max_tokens} in {ps.seq_len})"))
        same, diff = _against_paper([(str(s.n_classes), str(ps.n_classes), f"{s.n_classes} labels")])
        (same if same_len else diff).append(length)
        vs, vd = _against_paper([(str(s.vocab_size), str(ps.vocab_size), f"vocab {s.vocab_size}")])
        data = ", ".join(diff + vd + ([", ".join(same + vs) + " like the paper"] if same + vs else []))
        epochs = f"{ep} epochs" + (" like the paper" if ep == pep else f" (paper {pep})")
        lines.append(f"{name}: {data}; {epochs}, about {ours:,} training sequences seen, "
                     f"{_percent(100 * ours / theirs)} % of the paper's {theirs:,}")
    m, pm = p["model"], paper["model"]
    lines.append(ATTENTION_NOTE)
    if preset == "paper":  # the paper's model, data, epochs and optimiser: what differs is how and how often
        return Disclaimer(
            "Read this first: results at the `paper` preset: the paper's model, data, epochs and optimiser, few "
            "seeds.",
            f"{m['n_layers']} layers x {m['n_heads']} heads, d_model {m['d_model']} / d_ff {m['d_ff']}, "
            f"dropout {m['dropout']}, AdamW lr {p['train']['lr']:g}, batch {p['train']['batch_size']} (1024 in the "
            "authors' MLA script's settings, as theirs).",
            (*lines,
             "Trained on a GPU under bf16 autocast, with the attention dropout inside the attention kernel: GPU "
             "kernels are not bit-reproducible, so a re-run agrees within the seeds' spread, not bit for bit.",
             "Few seeds (grids/paper.toml orders three a cell, each GPU window trains a few runs; the paper ran "
             "one): a claim read run by run needs four counted runs, so three seeds a cell read *inconclusive (too "
             "few seeds)* (fewer than ten are marked \"(few runs)\"), an ordering needs three pairs "
             "(docs/preregistration.md), and a run still learning at its last epoch cannot settle a claim."))
    t, pt = p["train"], paper["train"]
    same, diff = _against_paper([
        (f"{m['n_layers']} x {m['n_heads']}", f"{pm['n_layers']} x {pm['n_heads']}",
         f"{m['n_layers']} layers x {m['n_heads']} heads"),
        (f"{m['d_model']} / {m['d_ff']}", f"{pm['d_model']} / {pm['d_ff']}",
         f"d_model {m['d_model']} / d_ff {m['d_ff']}"),
        (str(m["dropout"]), str(pm["dropout"]), f"dropout {m['dropout']}"),
        (f"{t['lr']:g}, {t['batch_size']}", f"{pt['lr']:g}, {pt['batch_size']}",
         f"AdamW lr {t['lr']:g}, batch {t['batch_size']}")])
    lead = ", ".join(same) + " like the paper" if same else ""
    lead = (f"{lead}, but {', '.join(diff)}" if lead and diff else lead or ", ".join(diff)) + "."
    return Disclaimer(
        f"Read this first: results at the `{preset}` preset, not the paper's setup.", lead,
        (*lines, p["optimiser"],
         "A claim *not reproduced at this preset* is not a refutation of the paper: it says what this scale "
         "shows. Rows where the runs cannot show a claim (did not learn, at the ceiling, within the seeds' "
         f"spread, still learning, too few seeds, not specific, specificity not shown, few pairs, not testable) "
         "say so and are not counted as tests; the scale ladder "
         f"({', '.join(LADDER[1:])}) shows which verdicts move with epochs, width or data."))


def scale_disclaimer(preset: str = "repro") -> str:
    """`disclaimer(preset)` as markdown: the box README, COMPARISON.md, the Findings page and the notebooks open
    with."""
    return disclaimer(preset).markdown()
