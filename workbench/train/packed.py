"""Packed runs: K runs of one shape trained in one process as one stacked model, each exactly as if alone.

    runs = train_packed([cfg_seed42, cfg_seed43, cfg_seed44], store)     # `workbench train --seed 42,43,44`

The K runs' configs must be equal but for their seeds (`pack_key`): same preset, scheme, architecture, task and
sizes. Their parameters are stacked along a leading K axis (`torch.func.stack_module_state`) and one forward
`vmap(functional_call)` computes all K models on their own batches; the buffers (rotary tables, fixed biases) are
functions of the config, equal across the K runs, and are shared. Each run keeps what a solo run has: its own
parameter init (model.seed), data order (`epoch_batches` with its train.seed), AdamW moments (one AdamW over the
stacked tensors is the K runs' AdamW slice by slice: every AdamW operation is elementwise), gradient clipping
(per run: the norm over that run's slices), learning-rate schedule, metrics, checkpoint, run folder and run id
(the solo config's), and it resumes alone with `train(..., resume=True)` as well as packed.

Only runs without attention / hidden dropout, with `train.batching` "random" and without a learned position bias
(relative, t5: CPU SDPA under vmap takes no mask that needs a gradient) are packed (`pack_key` None otherwise,
`unpackable` says why): a solo run draws its dropout masks from the global torch RNG layer after layer,
which K runs in one vmap cannot replay; and "length" batching gives each run a partial batch at its own step (and
trims each batch to its own longest sequence), which one stacked step per batch cannot follow. Packed, either would
not equal its solo run under the same run id: such runs train alone.

Equality with a solo run. vmap's own rules for `linear` (matmul, then + bias) and `layer_norm` with stacked
weights (normalise, then * weight + bias) round differently from the fused solo kernels (addmm, the affine
layer norm), and the difference grows over training (4e-5 in the loss after 2 repro-preset epochs). On CPU the
pack therefore runs every nn.Linear and nn.LayerNorm slice by slice (`exact_ops`: custom ops whose vmap rule
calls the solo kernel on each run's slice); every other op of the model (the q/k/v/o matmuls, SDPA, embedding,
activations) is bit-identical under vmap, and so are the gradients (but the PAD embedding row's: vmap's embedding
backward honours `padding_idx` for the first run only, so the pack zeroes that row's gradient in every run, as a
solo run's backward leaves it: `padding_rows`), AdamW and the per-run clipping
(`torch.nn.utils.get_total_norm` on each run's slices): a packed CPU run's metrics and weights equal its solo
run's (tests/test_packed.py). On CUDA the pack uses vmap's batched rules, but for
SDPA, which it folds into one call over the K x b sequences (`packed_sdpa`: vmap's own rule for the memory-efficient
kernel breaks its backward there), and agrees with solo within bf16 rounding.

Time. A pack is one process, so each run's `cpu_time_s` is its share of that process's CPU time (the process's / K,
added to what the run had before a resume) and totals over runs count a pack once; `pack_cpu_time_s` is the whole
process's CPU time in the session that finished the pack. Each run's `wall_time_s` is the pack's wall time.
"""
from __future__ import annotations

import copy
import json
import math
import sys
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from workbench.store import Run, RunStore, StoreError
from workbench.store.run import machine_identity, now_iso

from .loop import (StopTraining, checkpoint_due, check_checkpoint_every, check_threads, commit_epoch, derive_seed,
                   epoch_batches, epoch_row, epoch_state, load_optimizer_tensors, load_split, lr_at, mark_ended,
                   mark_running, pick_device, report_epoch, resync, set_lr, set_threads, stop_if_asked, tf32,
                   train_subset, zero_sums)

def _slice(t: torch.Tensor | None, dim: int | None, k: int) -> torch.Tensor | None:
    return t if t is None or dim is None else t.select(dim, k)


@torch.library.custom_op("pelab::packed_linear", mutates_args=())
def packed_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """F.linear; under vmap, the solo kernel on each slice (bit-identical to K solo runs)."""
    return F.linear(x, weight, bias)


@packed_linear.register_vmap
def _packed_linear_vmap(info, in_dims, x, weight, bias):
    return torch.stack([F.linear(*(_slice(t, d, k) for t, d in zip((x, weight, bias), in_dims)))
                        for k in range(info.batch_size)]), 0


@torch.library.custom_op("pelab::packed_layer_norm", mutates_args=())
def packed_layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
                      eps: float) -> torch.Tensor:
    """F.layer_norm over the last dimension; under vmap, the solo kernel on each slice."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@packed_layer_norm.register_vmap
def _packed_layer_norm_vmap(info, in_dims, x, weight, bias, eps):
    return torch.stack([F.layer_norm(_slice(x, in_dims[0], k), (x.shape[-1],), _slice(weight, in_dims[1], k),
                                     _slice(bias, in_dims[2], k), eps) for k in range(info.batch_size)]), 0


@torch.library.custom_op("pelab::packed_sdpa", mutates_args=())
def packed_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                dropout_p: float) -> torch.Tensor:
    """F.scaled_dot_product_attention(q, k, v, attn_mask=mask); under vmap, one call with the pack folded into the
    batch ([K, b, ...] -> [K b, ...], contiguous), so the CUDA kernels see a plain batch: vmap's own batching rule
    for the memory-efficient kernel fails in the backward on CUDA ("LSE is not correctly aligned (strideH)",
    torch 2.11, measured on an H200), and under vmap autocast leaves SDPA in fp32 (the fold casts to the autocast
    dtype, as a solo run's SDPA is cast)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


@packed_sdpa.register_vmap
def _packed_sdpa_vmap(info, in_dims, q, k, v, mask, dropout_p):
    n = info.batch_size
    ts = [t.movedim(d, 0) if d is not None else t.expand(n, *t.shape)
          for t, d in zip((q, k, v, mask), in_dims[:4]) if t is not None]
    if mask is not None:
        ts[3] = ts[3][(slice(None),) + (None,) * (5 - ts[3].dim())]  # [K, (b), (h), (q), k]: the mask broadcasts
    b = ts[0].shape[1]
    folded = [t.broadcast_to(n, b, *t.shape[2:]).reshape(n * b, *t.shape[2:]) for t in ts]  # copies: contiguous
    where = q.device.type
    if torch.is_autocast_enabled(where):  # under vmap autocast leaves SDPA in fp32; a solo run's is in bf16
        folded = [t.to(torch.get_autocast_dtype(where)) for t in folded]
    q, k, v, *mask = folded
    return F.scaled_dot_product_attention(q, k, v, mask[0] if mask else None,
                                          dropout_p=dropout_p).unflatten(0, (n, b)), 0


def fold_attention(model: torch.nn.Module) -> None:
    """Route every SDPA call of `model`'s attention layers through `packed_sdpa` (CUDA packs)."""
    from workbench.model.attention import Attention

    for m in model.modules():
        if isinstance(m, Attention):
            m.sdpa = packed_sdpa


def exact_ops(model: torch.nn.Module) -> None:
    """Route the nn.Linear and nn.LayerNorm modules of `model` through `packed_linear` / `packed_layer_norm`."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.forward = lambda x, m=m: packed_linear(x, m.weight, m.bias)
        elif isinstance(m, torch.nn.LayerNorm):
            if m.normalized_shape != (m.weight.shape[-1],):
                raise ValueError(f"packed runs: a LayerNorm over {m.normalized_shape} is not supported")
            m.forward = lambda x, m=m: packed_layer_norm(x, m.weight, m.bias, m.eps)


def unpackable(cfg: dict[str, Any]) -> str | None:
    """Why the run of `cfg` cannot be packed (see the module), as what to change; None when it can."""
    if cfg["model"].get("dropout", 0.0) > 0:
        return ("packed runs need model.dropout=0: a packed run cannot replay a solo run's dropout masks (train these "
                "runs one at a time, or set model.dropout=0)")
    from workbench.model.pe import get_scheme

    scheme = cfg["model"].get("scheme")
    if get_scheme(scheme).learned_bias:
        return (f"packed runs cannot train {scheme}'s learned position bias: inside a pack SDPA takes no attention "
                "mask that needs a gradient (these runs train one at a time)")
    if cfg["train"].get("batching", "random") != "random":
        return (f"packed runs need train.batching='random' (not {cfg['train']['batching']!r}): with length batching "
                "each run has its partial batch at another step and trims its batches to its own sequences (train "
                "these runs one at a time, or set train.batching=random)")
    return None


def pack_key(cfg: dict[str, Any]) -> str | None:
    """Configs with equal keys can be trained as one pack: the config without its seeds (train.seed and the
    model.seed that follows it) and labels. None when the run cannot be packed (`unpackable`)."""
    if unpackable(cfg) is not None:
        return None
    core = {"model": {k: v for k, v in cfg["model"].items() if k != "seed"}, "task": cfg["task"],
            "train": {k: v for k, v in cfg["train"].items() if k != "seed"}}
    return json.dumps(core, sort_keys=True, default=str)


def check_packable(configs: list[dict[str, Any]]) -> None:
    """ValueError naming what differs when `configs` cannot be one pack."""
    for c in configs:
        why = unpackable(c)
        if why is not None:
            raise ValueError(why)
    if len({pack_key(c) for c in configs}) > 1:
        raise ValueError("packed runs must share every config field but their seeds (same preset, scheme, arch, "
                         "task and sizes); train the others in their own pack")
    seeds = [c["train"]["seed"] for c in configs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"packed runs need distinct seeds, got {seeds}")


def _stacked_optimizer_tensors(opt: torch.optim.Optimizer, k: int) -> dict[str, torch.Tensor]:
    """Run k's AdamW state in the solo format (`loop.optimizer_tensors`): slice k of each stacked moment."""
    out = {}
    for idx, st in opt.state_dict()["state"].items():
        for key, value in st.items():
            value = value if torch.is_tensor(value) else torch.tensor(value)
            out[f"state.{idx}.{key}"] = value[k].clone() if value.dim() > 0 else value.clone()
    return out


def _rng_after_seeding(seed: int, epoch: int, dev: torch.device) -> dict[str, torch.Tensor]:
    """The global RNG state a solo run without dropout checkpoints after `epoch`: the state its per-epoch
    re-seeding left (no draw follows at dropout 0)."""
    rng = {"rng.torch": torch.Generator().manual_seed(derive_seed(seed, epoch, "torch")).get_state()}
    if dev.type == "cuda":
        rng["rng.cuda"] = torch.Generator(device=dev).manual_seed(derive_seed(seed, epoch, "torch")).get_state()
    return rng


def _clip_per_run(grads: list[torch.Tensor], max_norm: float) -> None:
    """`clip_grad_norm_` of each run on its slices of the stacked gradients, computed as it computes it:
    coef = max_norm / (total norm + 1e-6), at most 1."""
    for k in range(grads[0].shape[0]):
        mine = [g[k] for g in grads]
        coef = torch.clamp(max_norm / (torch.nn.utils.get_total_norm(mine, 2.0) + 1e-6), max=1.0)
        torch._foreach_mul_(mine, coef)


def padding_rows(model: torch.nn.Module) -> list[tuple[str, int]]:
    """(weight name, `padding_idx`) of each nn.Embedding of `model` with one: the rows whose gradient a solo run's
    embedding backward leaves 0 (so AdamW leaves them at 0) and vmap's only in the pack's first run; the pack
    zeroes them in every run."""
    return [(f"{name}.weight", m.padding_idx) for name, m in model.named_modules()
            if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None]


def shared_buffers(models: list[torch.nn.Module], scheme: str) -> dict[str, torch.Tensor]:
    """The buffers every packed model shares (config-derived: RoPE's angles, masks), from the first; ValueError
    when a scheme's buffers differ between seeds (such runs cannot be packed)."""
    buffers = dict(models[0].named_buffers())
    for m in models[1:]:
        if any(not torch.equal(buffers[name], t) for name, t in m.named_buffers()):
            raise ValueError(f"scheme {scheme!r} has buffers that differ between seeds; train these runs alone")
    return buffers


def _restore_pack(runs: list[Run], ckpts: list, opt: torch.optim.Optimizer):
    """As `loop.restore` for a pack: each run's optimizer moments stacked into `opt` (the weights were stacked from
    the restored models), run.json and metrics as each checkpoint left its run. Returns (epochs done, steps done,
    each run's wall seconds before this session, each run's metric rows kept); the pack's runs stopped after the
    same epoch (`train_packed` checks)."""
    if ckpts[0] is None:
        return 0, 0, [0.0] * len(runs), [[] for _ in runs]
    per_run = [ck[1] for ck in ckpts]
    start_epoch, step = ckpts[0][2]["epoch"], ckpts[0][2]["step"]
    load_optimizer_tensors(opt, {key: torch.stack([t[key] for t in per_run]) if per_run[0][key].dim() > 0
                                 else per_run[0][key] for key in per_run[0] if key.startswith("state.")})
    rows = [[row for row in r.metric_rows() if row["epoch"] <= start_epoch] for r in runs]
    for r, mine, ck in zip(runs, rows, ckpts):
        if mine:
            resync(r, mine, ck[2])
    return start_epoch, step, [ck[2].get("wall_time_s", 0.0) for ck in ckpts], rows


def _pack_step(fwd, opt: torch.optim.Optimizer, params: dict[str, torch.Tensor], pads: list[tuple[str, int]],
               xb: torch.Tensor, yb: torch.Tensor, sums, *, ignore: int | None, amp: bool,
               grad_clip: float | None) -> None:
    """One AdamW step of K stacked runs on their batches xb [K, b, pos], yb [K, b]: the loss summed over the runs,
    so run k's gradient is its own mean loss's; the pad embedding rows kept at zero (`padding_rows`), each run's
    gradient clipped by its own norm. Adds each run's loss sum, correct and counted examples to `sums` ([K] each,
    on the device: nothing is read back)."""
    with torch.autocast(xb.device.type, dtype=torch.bfloat16, enabled=amp):
        logits = fwd(params, xb)  # [K, b, outputs]
    keep = torch.ones_like(yb, dtype=torch.bool) if ignore is None else yb != ignore
    losses = F.cross_entropy(logits.float().flatten(0, 1), yb.flatten(), reduction="none").view_as(yb)
    batch_loss, batch_counted = (losses * keep).sum(1), keep.sum(1)
    loss = (batch_loss / batch_counted.clamp(min=1)).sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    for name, row in pads:
        params[name].grad[:, row] = 0
    if grad_clip:
        _clip_per_run([p.grad for p in params.values()], grad_clip)
    opt.step()
    loss_sum, correct, counted = sums
    loss_sum += batch_loss.detach()
    correct += ((logits.argmax(-1) == yb) & keep).sum(1)
    counted += batch_counted


def train_packed(configs: list[dict[str, Any]], store: RunStore | None = None, *, resume: bool = True,
                 device: str | None = None, amp: bool | None = None, threads: int | None = None,
                 progress: bool = True, stop_after_epochs: int | None = None, checkpoint_every: int = 1,
                 on_epoch: Callable[[Run, dict[str, Any]], None] | None = None) -> list[Run]:
    """Train the runs of `configs` (equal but for their seeds) as one pack; returns their Runs in order.
    Finished runs are returned as they are; the others must all be new or all stopped after the same epoch
    (ValueError otherwise: resume them alone). Same options as `loop.train`."""
    from .presets import estimate_gpu_memory, gpu_free_bytes, validate_config

    store = store if store is not None else RunStore()
    for c in configs:
        validate_config(c)
    check_packable(configs)
    dev = pick_device(device)
    check_threads(threads)
    check_checkpoint_every(checkpoint_every)
    if dev.type == "cuda":
        need = len(configs) * estimate_gpu_memory(configs[0])
        if need > gpu_free_bytes(dev):
            raise ValueError(f"a pack of {len(configs)} runs needs about {need / 1e9:.3g} GB of GPU memory, more "
                             f"than {dev} has free; pack fewer runs (--pack)")
    locks = []
    try:
        for c in configs:
            locks.append(store.lock(store.run_id(c)).acquire())  # RunLocked: another process trains one
        fresh = [not store.exists(store.run_id(c)) for c in configs]
        runs = [store.create(c) for c in configs]
        todo = [r for r in runs if r.status != "finished"]
        epochs_done = {(r.load_checkpoint()[2]["epoch"] if r.has_checkpoint() else 0) for r in todo}
        if len(epochs_done) > 1:
            raise ValueError(f"these runs stopped after different epochs ({sorted(epochs_done)}); resume them alone")
        if todo and epochs_done != {0} and not resume:
            raise StoreError("exists unfinished; pass resume=True (--resume) to continue it", todo[0].id)
        if todo:
            try:
                with tf32(dev):
                    _train_pack(todo, store, dev=dev, amp=amp, threads=threads, progress=progress,
                                stop_after_epochs=stop_after_epochs, checkpoint_every=checkpoint_every,
                                on_epoch=on_epoch)
            except BaseException:  # as `train`: a run that failed before its first checkpoint leaves no folder
                for run, lock, new in zip(runs, locks, fresh):
                    if new and not run.has_checkpoint():
                        store.delete(run.id, lock=lock)
                raise
        return [Run(store, r.id) for r in runs]
    finally:
        for lock in locks:
            lock.release()


def _train_pack(runs: list[Run], store: RunStore, *, dev: torch.device, amp: bool | None, threads: int | None,
                progress: bool, stop_after_epochs: int | None, checkpoint_every: int,
                on_epoch: Callable[[Run, dict[str, Any]], None] | None) -> None:
    from torch.func import functional_call, stack_module_state, vmap

    from workbench.model import PEClassifier

    K = len(runs)
    cfg, tcfg = runs[0].config, runs[0].config["train"]
    seeds = [r.config["train"]["seed"] for r in runs]
    amp = (dev.type == "cuda") if amp is None else amp
    n_threads = set_threads(threads)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    ds, x_train, y_train, x_test, y_test = load_split(store, cfg["task"], dev)
    models = [PEClassifier(r.model_config()).to(dev) for r in runs]
    ckpts = [r.load_checkpoint() if r.has_checkpoint() else None for r in runs]
    for m, ck in zip(models, ckpts):
        if ck is not None:
            m.load_state_dict(ck[0], strict=True)
    bs, epochs, ignore = tcfg["batch_size"], tcfg["epochs"], tcfg.get("ignore_label")
    batching = tcfg.get("batching", "random")  # "random" (`unpackable`): every run's batches of one size per step
    params, _ = stack_module_state(models)  # {name: [K, ...]} leaves with requires_grad
    buffers = shared_buffers(models, cfg["model"]["scheme"])
    base = copy.deepcopy(models[0]).to("meta")
    if dev.type == "cpu":
        exact_ops(base)
    else:
        fold_attention(base)
    opt = torch.optim.AdamW(list(params.values()), lr=tcfg["lr"], betas=tuple(tcfg["betas"]),
                            weight_decay=tcfg["weight_decay"], fused=dev.type == "cuda")
    start_epoch, step, walls, rows = _restore_pack(runs, ckpts, opt)

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, buffers), (x,))

    fwd = vmap(forward)
    pads = padding_rows(base)
    lengths = (x_train != 0).sum(1).cpu()
    n = len(x_train)
    evals = [(x_test, y_test, x_train[s.to(dev)], y_train[s.to(dev)])
             for s in (train_subset(n, len(x_test), sd) for sd in seeds)]
    steps_per_epoch = math.ceil(n / bs)
    total_steps = steps_per_epoch * epochs
    for r, ck in zip(runs, ckpts):
        mark_running(r, resumed=ck is not None, start_epoch=start_epoch, n_threads=n_threads, dev=dev, amp=amp,
                     compiled=False, sdpa_backend=None, dataset_hash=ds.hash, scheme_params=models[0].scheme.kw,
                     epochs=epochs, checkpoint_every=checkpoint_every, packed=K,
                     packed_with=[q.id for q in runs if q is not r])
    t_session, cpu_session = time.perf_counter(), time.process_time()
    cpu_before = [r.info.get("cpu_time_s", 0.0) if ck else 0.0 for r, ck in zip(runs, ckpts)]
    try:
        from tqdm.auto import tqdm

        for epoch in range(start_epoch, epochs):
            order = [epoch_batches(lengths, bs, sd, epoch, batching) for sd in seeds]
            sizes = [len(b) for b in order[0]]
            batches = torch.stack([torch.cat(o) for o in order]).to(dev).split(sizes, dim=1)  # [K, b] each
            loss_sum, correct, counted = zero_sums(dev, (K,))
            computed = 0
            t0 = time.perf_counter()
            bar = tqdm(range(steps_per_epoch), desc=f"pack of {K} {epoch + 1}/{epochs}", leave=False,
                       disable=not progress, file=sys.stderr, dynamic_ncols=True)
            for i in bar:
                idx = batches[i]
                xb, yb = x_train[idx], y_train[idx]  # [K, b, pos], [K, b]
                lr = lr_at(step, total_steps, tcfg)
                set_lr(opt, lr)
                _pack_step(fwd, opt, params, pads, xb, yb, (loss_sum, correct, counted), ignore=ignore, amp=amp,
                           grad_clip=tcfg.get("grad_clip"))
                step += 1
                computed += xb[0].numel()
                if progress and (i % 10 == 0 or i == steps_per_epoch - 1):
                    seen = counted.clamp(min=1)
                    bar.set_postfix(loss=" ".join(f"{v:.3f}" for v in (loss_sum / seen).tolist()), lr=f"{lr:.2e}")
            bar.close()
            if dev.type == "cuda":  # the epoch's kernels done before its time is read
                torch.cuda.synchronize(dev)
            train_time = time.perf_counter() - t0
            checkpoint = checkpoint_due(epoch, epochs, checkpoint_every, stop_after_epochs)
            with torch.no_grad():
                for k, m in enumerate(models):  # each run's model holds its slice for evaluation and checkpoint
                    for name, p in m.named_parameters():
                        p.copy_(params[name][k])
            for k, (run, m) in enumerate(zip(runs, models)):
                row = epoch_row(m, evals[k], tcfg, amp, epoch=epoch, step=step, lr=lr,
                                sums=(loss_sum[k], correct[k], counted[k]), n=n, useful=int(lengths.sum()),
                                computed=computed, train_time=train_time,
                                clock=lambda: walls[k] + time.perf_counter() - t_session)
                optim_t = (_stacked_optimizer_tensors(opt, k) | _rng_after_seeding(seeds[k], epoch, dev)) \
                    if checkpoint else None
                commit_epoch(run, rows[k], row, m, optim_t,
                             epoch_state(epoch, step, total_steps, steps_per_epoch, row["wall_s"], lr, batching),
                             dev=dev, cpu_time_s=cpu_before[k] + (time.process_time() - cpu_session) / K)
                report_epoch(run, row, epochs, progress, on_epoch)
            stop_if_asked(epoch, epochs, stop_after_epochs)
    except BaseException as e:
        mark_ended(runs, e)
        if isinstance(e, StopTraining):
            return
        raise
    pack_cpu = time.process_time() - cpu_session  # read once: the K shares add up to exactly the whole
    for k, r in enumerate(runs):
        r.update_info(status="finished", finished=now_iso(), wall_time_s=walls[k] + time.perf_counter() - t_session,
                      cpu_time_s=cpu_before[k] + pack_cpu / K, pack_cpu_time_s=pack_cpu,
                      machine_at_finish=machine_identity())
