"""What the sweep-engine tests share (test_sweep_workers.py, test_ray.py): one tiny smoke model and how two sweeps'
metrics are compared."""

TINY = {"model.d_model": 16, "model.n_heads": 2, "model.d_ff": 32, "model.n_layers": 1, "task.n_examples": 500,
        "train.batch_size": 32, "train.epochs": 2}


def quiet(msg):
    pass


def metrics_without_timing(run):
    """Metrics rows without the speed and clock fields (epoch_time_s, wall_s, seq_per_s, tok_per_s, time)."""
    return [{k: v for k, v in row.items() if not k.endswith(("_s", "time"))} for row in run.metric_rows()]
