"""Training: presets (plain configs), the training loop (one function), resumable sweeps.

    from workbench.train import resolve_config, train, sweep
    cfg = resolve_config(preset="cpu", scheme="rope", task="trigger-distance", sets=["train.epochs=2"])
    run = train(cfg, store)                 # -> workbench.store.Run (finished)
    sweep("grids/cpu.toml", store)          # skips finished runs, resumes interrupted ones
"""
from .loop import StopTraining, derive_seed, epoch_permutation, evaluate, lr_at, pick_device, set_threads, train
from .presets import (PRESETS, TASKS, base_config, canonical_task, parse_sets, parse_value, resolve_config,
                      validate_config)
from .sweep import expand_grid, grid_points, load_grid, sweep

__all__ = ["PRESETS", "TASKS", "StopTraining", "base_config", "canonical_task", "derive_seed", "epoch_permutation",
           "evaluate", "expand_grid", "grid_points", "load_grid", "lr_at", "parse_sets", "parse_value", "pick_device",
           "resolve_config", "set_threads", "sweep", "train", "validate_config"]
