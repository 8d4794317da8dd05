"""Synthetic tasks of PE-Lab: trigger distance (Task 1) and trigger count (Task 2). numpy + stdlib only.

    spec = get_spec("trigger-distance", preset="cpu", seed=42, middle_max=20)
    ds = load_or_generate(spec, cache_dir)        # or generate(spec) in memory
"""
from .cache import CacheError, cache_path, default_cache_dir, load_dataset, load_or_generate
from .dataset import Dataset
from .generators import GENERATOR_VERSION, content_hash, generate
from .specs import PAD, PRESETS, TASKS, TriggerCountSpec, TriggerDistanceSpec, get_spec, spec_from_dict, spec_of_task

__all__ = ["CacheError", "Dataset", "GENERATOR_VERSION", "PAD", "PRESETS", "TASKS", "TriggerCountSpec",
           "TriggerDistanceSpec", "cache_path", "content_hash", "default_cache_dir", "generate", "get_spec",
           "load_dataset", "load_or_generate", "spec_from_dict", "spec_of_task"]
