"""Ray as the cluster engine: `sweep(grid, store, ray=ADDRESS)` / `workbench sweep GRID --ray [ADDRESS]`.

Every grid point that is not finished becomes one Ray task (`num_cpus` = the run's torch threads,
`num_gpus` = a fraction so several small runs share one GPU) that runs `sweep.attempt` against the same store
path, which every node must see (a shared file system): the skip / resume / busy / fail decisions are those of
a sequential sweep, and a task whose worker dies leaves its run resumable by the next sweep. Needs the
optional extra: `pip install pe-lab[ray]`. Setting up a cluster (`ray start --head`, Slurm): docs/training.md.
"""
from __future__ import annotations

import socket
from typing import Any

from workbench.store import RunStore

from .sweep import attempt

INSTALL = "pip install 'pe-lab[ray]'"
DEFAULT_PORTS = {"ray://": 10001, "": 6379}  # Ray client server / GCS of `ray start --head`


def import_ray():
    """The `ray` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError(f"--ray needs Ray, which is not installed: {INSTALL}") from e
    return ray


def check_address(address: str, timeout: float = 3.0) -> None:
    """ValueError within `timeout` seconds when nothing listens at a HOST:PORT or ray://HOST:PORT address
    (ray.init itself would retry for a minute or more). 'auto' and 'local' are left to Ray."""
    if address in ("auto", "local"):
        return
    scheme = "ray://" if address.startswith("ray://") else ""
    hostport = address[len(scheme):]
    host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    try:
        port_n = int(port) if port else DEFAULT_PORTS[scheme]
        socket.create_connection((host or "127.0.0.1", port_n), timeout=timeout).close()
    except (OSError, ValueError) as e:
        raise ValueError(f"--ray {address}: no Ray cluster reachable there ({e}). Start the head node with "
                         "`ray start --head` and pass the address it prints (HOST:6379), or `--ray` alone for a "
                         "local cluster") from None


def connect(address: str | None) -> None:
    """Connect to the Ray cluster at `address` (None: the one already initialised, else a new local one)."""
    ray = import_ray()
    if address is not None:
        check_address(address)
    if ray.is_initialized():
        return
    ray.init(address=address, log_to_driver=True, configure_logging=False)


def _run_task(root: str, data_dir: str, cfg: dict[str, Any], head: str, opts: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: one grid point, in whichever worker process Ray picks (its log lines reach the driver)."""
    return attempt(cfg, RunStore(root, data_dir=data_dir), head=head, progress=False, **opts)


def sweep_ray(jobs: list[tuple[str, dict]], store: RunStore, *, fail_fast: bool, log, num_gpus: float = 0.0,
              **opts) -> list[dict[str, Any]]:
    """Submit `jobs` [(head, config)] as Ray tasks and collect the records in job order (see sweep.sweep)."""
    ray = import_ray()
    threads = opts["threads"] = opts.get("threads") or 1
    env = {"OMP_WAIT_POLICY": "PASSIVE", "PELAB_THREADS": str(threads)}
    task = ray.remote(_run_task).options(num_cpus=threads, num_gpus=num_gpus, max_retries=0,
                                         runtime_env={"env_vars": env})
    refs = {task.remote(str(store.root), str(store.data_dir), cfg, head, opts): k
            for k, (head, cfg) in enumerate(jobs)}
    results: dict[int, dict[str, Any]] = {}
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            k = refs[ready[0]]
            head = jobs[k][0]
            try:
                rec = ray.get(ready[0])
            except ray.exceptions.RayError as e:  # the worker died (killed, out of memory) or Ray failed
                err = f"Ray task failed ({type(e).__name__}); the next sweep resumes the run"
                rec = {"id": head.split()[-1], "outcome": "failed", "test_acc": None, "error": err}
                log(f"{head}  FAILED: {err}")
            results[k] = rec
            if rec["outcome"] == "failed" and fail_fast:
                for ref in pending:
                    ray.cancel(ref)
                raise RuntimeError(f"sweep stopped at the first failing run (--fail-fast): {rec['error']}")
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref)  # KeyboardInterrupt inside the task: train() marks the run interrupted
        raise
    return [results[k] for k in sorted(results)]
