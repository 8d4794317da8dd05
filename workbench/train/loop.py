"""The training loop: one function, readable in one sitting (nanoGPT-style).

    run = train(config, store)          # config from presets.resolve_config(...)

Device: CUDA when available (bf16 autocast, fused AdamW, optional torch.compile), else CPU; the code path
is the same: one `train_step` per batch, which reads nothing back to the host (metric sums stay on the device and
are read once an epoch). `compile=True`: torch.compile, every batch of one shape (`pad_batch`), fused capturable
AdamW with a tensor lr. `deadline`: checkpoint and stop before an epoch that would end past it.
On CPU a run is deterministic given its seed: parameter init follows `model.seed`, and at the start of epoch e
the global torch RNG (dropout) and the shuffling generator are re-seeded from (train.seed, e), so a resumed run
replays exactly the batches and dropout masks of an uninterrupted one.
A checkpoint (weights, optimizer moments, scheduler step, RNG states) is committed after every
`checkpoint_every`-th epoch (default 1) and after the last; a resume replays the epochs since, exactly.
After each epoch (`train.train_eval` "every"; after the last only with "last") the model is also evaluated (eval
mode) on a fixed subset of the training set (`train_subset`: min(n_train, n_test) examples drawn by their own
generator, so no training RNG is consumed): metrics `train_loss_eval` / `train_acc_eval`, beside the running
means `train_loss` / `train_acc` of the epoch.
On CUDA, run.json records the peak GPU memory (`peak_gpu_mb`, torch.cuda.max_memory_allocated).
Bit-identical results need the same seed *and* the same CPU thread count (run.json `threads`) and numerics
(`numerics`): a resume with another thread count or other numerics warns and records both (`resume_record`).
The trainer holds the run's OS lock (`RunStore.lock`) for its whole life.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
import time
import warnings
from typing import Any, Callable

import torch
import torch.nn.functional as F

from workbench.store import Run, RunStore, StoreError
from workbench.store.atomic import interrupts_deferred
from workbench.store.run import MODEL, machine_identity, now_iso, numerics_record, process_identity


class StopTraining(Exception):
    """Raised inside the loop to stop after a given epoch (the run is left `interrupted`, resumable)."""


def derive_seed(seed: int, epoch: int, stream: str) -> int:
    """A 63-bit seed that depends only on (seed, epoch, stream)."""
    digest = hashlib.sha256(f"pe-lab:{seed}:{epoch}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def epoch_permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The shuffling order of epoch `epoch` (0-based), a function of (seed, epoch) only."""
    g = torch.Generator().manual_seed(derive_seed(seed, epoch, "shuffle"))
    return torch.randperm(n, generator=g)


def epoch_batches(lengths: torch.Tensor, batch_size: int, seed: int, epoch: int, batching: str = "random",
                  chunk_batches: int = 64) -> list[torch.Tensor]:
    """The index batches of epoch `epoch`, a function of (lengths, batch_size, seed, epoch) only.

    random: consecutive slices of `epoch_permutation`.
    length: "group by length" (as in NLP training since Vaswani et al. 2017): take the same permutation, sort
    by sequence length (descending, stable) within chunks of `chunk_batches` batches, slice into batches, then
    shuffle the batch order, so each batch holds similar lengths and can be trimmed to its longest sequence.
    """
    n = len(lengths)
    perm = epoch_permutation(n, seed, epoch)
    if batching == "random":
        return list(perm.split(batch_size))
    if batching != "length":
        raise ValueError(f"train.batching={batching!r}: use 'random' or 'length'")
    batches = []
    for chunk in perm.split(batch_size * chunk_batches):
        order = torch.sort(lengths[chunk], descending=True, stable=True).indices
        batches += list(chunk[order].split(batch_size))
    g = torch.Generator().manual_seed(derive_seed(seed, epoch, "batches"))
    return [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]


def train_subset(n_train: int, n_test: int, seed: int) -> torch.Tensor:
    """The fixed training examples `train_acc_eval` is measured on: min(n_train, n_test) indices, sorted, drawn
    by a generator of their own seeded from (train.seed, "train_eval") -- the same for every epoch."""
    g = torch.Generator().manual_seed(derive_seed(seed, 0, "train_eval"))
    return torch.randperm(n_train, generator=g)[:min(n_train, n_test)].sort().values


def trim(x: torch.Tensor) -> torch.Tensor:
    """Drop the trailing columns that are PAD (0) in every row of a right-padded batch."""
    width = int((x != 0).any(0).nonzero().max().item()) + 1 if bool((x != 0).any()) else 1
    return x[:, :width]


def lr_at(step: int, total_steps: int, train: dict[str, Any]) -> float:
    """Linear warm-up over `warmup_frac` of all steps, then cosine decay to 0 (or constant)."""
    lr, warmup = train["lr"], round(train["warmup_frac"] * total_steps)
    if step < warmup:
        return lr * (step + 1) / warmup
    if train["schedule"] == "constant":
        return lr
    progress = (step - warmup) / max(1, total_steps - warmup)
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


MAX_THREADS_PER_CPU = 4


def check_checkpoint_every(n: Any) -> None:
    """ValueError unless `n` (epochs between checkpoints) is an integer >= 1."""
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
        raise ValueError(f"--checkpoint-every {n!r}: must be an integer >= 1 (1: every epoch)")


def check_threads(threads: Any, name: str = "--threads") -> int | None:
    """`threads` (or $PELAB_THREADS) as a validated count in [1, 4 x CPUs], or None (keep torch's default)."""
    if threads is None:
        env = os.environ.get("PELAB_THREADS", "")
        if not env:
            return None
        threads, name = env, "$PELAB_THREADS"
    limit = MAX_THREADS_PER_CPU * (os.cpu_count() or 1)
    try:
        n = int(threads)
        ok = str(threads).strip().lstrip("+").isdigit() and 1 <= n <= limit
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} {threads!r}: must be an integer from 1 to {limit} ({MAX_THREADS_PER_CPU} x the "
                         f"{os.cpu_count()} CPUs of this machine)")
    return n


def set_threads(threads: int | None) -> int:
    """Use `threads` (or $PELAB_THREADS) intra-op CPU threads; otherwise keep torch's default."""
    n = check_threads(threads)
    if n:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (getrusage ru_maxrss: KiB on Linux, bytes on macOS)."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024 if sys.platform == "darwin" else 1024)


def pick_device(device: str | None = None) -> torch.device:
    """`device` (default: cuda when available, else cpu); ValueError for an unknown or unavailable device."""
    try:
        dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except (RuntimeError, TypeError):
        raise ValueError(f"--device {device!r} is not a device; use cpu or cuda (cuda:N)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device!r}: CUDA is not available on this machine (it has no CUDA GPU); use "
                         "--device cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {device!r}: PE-Lab trains on cpu or cuda")
    return dev


def counted_loss(logits: torch.Tensor, y: torch.Tensor, ignore_label: int | None,
                 valid: torch.Tensor | None = None):
    """(summed cross-entropy, number of correct predictions, number of counted examples) over the examples whose
    label is not `ignore_label` (None: all) and, given `valid` (a padded batch's real rows), that are valid. As the
    authors' `CrossEntropyLoss(ignore_index=0)` and their accuracy over `labels != 0`: an ignored example counts
    for nothing in either."""
    keep = torch.ones_like(y, dtype=torch.bool) if ignore_label is None else y != ignore_label
    if valid is not None:
        keep = keep & valid
    losses = F.cross_entropy(logits.float(), y, reduction="none")
    return (losses * keep).sum(), ((logits.argmax(-1) == y) & keep).sum(), keep.sum()


def pad_batch(xb: torch.Tensor, yb: torch.Tensor, size: int):
    """(x, y, valid) of `size` rows: a partial batch completed with PAD-only rows (label 0) that count for nothing
    (valid False), so that a compiled step sees one shape; the loss and gradients are the unpadded batch's."""
    n = len(xb)
    valid = torch.arange(size, device=xb.device) < n
    return F.pad(xb, (0, 0, 0, size - n)), F.pad(yb, (0, size - n)), valid


@torch.no_grad()
def evaluate(model, x: torch.Tensor, y: torch.Tensor, batch_size: int, amp: bool,
             trim_pads: bool = False, ignore_label: int | None = None, static: bool = False) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `model` in eval mode over the examples not labelled `ignore_label`.
    trim_pads: visit the examples sorted by length and trim each batch's trailing pads (same sums, fewer tokens;
    only for models whose pads are inert). static: one batch shape for a compiled model (the last batch padded
    with ignored rows, nothing trimmed)."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), device=x.device)
    correct = torch.zeros((), device=x.device, dtype=torch.long)
    counted = torch.zeros((), device=x.device, dtype=torch.long)
    if trim_pads:
        order = torch.sort((x != 0).sum(1), descending=True, stable=True).indices
        x, y = x[order], y[order]
    for i in range(0, len(x), batch_size):
        xb, yb, valid = x[i:i + batch_size], y[i:i + batch_size], None
        if static and len(xb) < batch_size:
            xb, yb, valid = pad_batch(xb, yb, batch_size)
        elif trim_pads and not static:
            xb = trim(xb)
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
            logits = model(xb)
        l, c, k = counted_loss(logits, yb, ignore_label, valid)
        loss_sum += l
        correct += c
        counted += k
    model.train(was_training)
    n = max(1, counted.item())
    return loss_sum.item() / n, correct.item() / n


def make_optimizer(model, tcfg: dict[str, Any], dev: torch.device, compile: bool = False) -> torch.optim.AdamW:
    """AdamW with the run's settings: fused on CUDA; for the compiled step fused and capturable with a tensor
    learning rate on any device (no host read of the step count, no recompile when lr changes: `set_lr`)."""
    kw = dict(betas=tuple(tcfg["betas"]), weight_decay=tcfg["weight_decay"])
    if compile:
        return torch.optim.AdamW(model.parameters(), lr=torch.tensor(float(tcfg["lr"]), device=dev), fused=True,
                                 capturable=True, **kw)
    return torch.optim.AdamW(model.parameters(), lr=tcfg["lr"], fused=dev.type == "cuda", **kw)


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    """Every parameter group's learning rate: in place into a tensor lr (no new graph), else the float."""
    for group in opt.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


TORCH_SDPA_BACKENDS = ("flash_attention", "efficient_attention", "cudnn_attention", "math")
SDPA_BACKENDS = TORCH_SDPA_BACKENDS + ("triton",)  # triton: model.triton_attention


def sdpa_backend_context(name: str | None):
    """The context a run trains in: SDPA tries backend `name` first (`torch.nn.attention.sdpa_kernel`, with
    priority) and the other SDPA_BACKENDS, in that order, only for a call it cannot run (flash attention needs one
    head size for queries, keys and values; MLA's queries and keys are wider than its values), for the whole run,
    compilation included (a backend chosen inside a compiled region would bypass AOTAutograd's cache); PyTorch's own
    order for None. `triton`: PE-Lab's own kernel for short sequences (`model.triton_attention`) wherever it runs,
    PyTorch's order for the other calls. Another backend is the same attention with other kernels (other rounding,
    other dropout draws), as `compile` is: a process option recorded in run.json `sdpa_backend`. ValueError for an
    unknown name, or for `triton` where the triton package is missing."""
    if name is None:
        return contextlib.nullcontext()
    if name not in SDPA_BACKENDS:
        raise ValueError(f"SDPA backend {name!r}: use one of {', '.join(SDPA_BACKENDS)}")
    if name == "triton":
        try:
            from workbench.model.triton_attention import triton_attention
        except ImportError as e:
            raise ValueError(f"SDPA backend 'triton' needs the triton package ({e}): install it (CUDA builds of "
                             "torch bring it) or pick another backend") from None
        return triton_attention()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    order = [name] + [b for b in TORCH_SDPA_BACKENDS if b != name]
    return sdpa_kernel([getattr(SDPBackend, b.upper()) for b in order], set_priority=True)


def compile_mode(compile: bool | str | None) -> str | None:
    """`train`'s `compile` as torch.compile's mode: None (eager) for False / None, "default" for True, else one of
    COMPILE_MODES ("reduce-overhead": CUDA graphs, where a GPU step is bound by kernel launches). (Each block
    compiled alone, `--compile-scope blocks`, was removed on 2026-11-27: a 1.9x slower step on an H100,
    docs/training.md.)"""
    if compile is None or compile is False:
        return None
    if compile is True:
        return "default"
    if compile not in COMPILE_MODES:
        raise ValueError(f"compile mode {compile!r}: use one of {', '.join(COMPILE_MODES)}")
    return compile


def compiled(model: torch.nn.Module, example: torch.Tensor, amp: bool, mode: str | None = None):
    """torch.compile(model, mode=mode), after one eager forward of `example[:1]` in eval mode without gradients
    under the step's autocast. That forward fills the position tables a scheme caches per length (RoPE's cos/sin,
    a fixed input PE's table) with the eager path's values; left to the first compiled call, they are filled
    inside its trace, its guards fail on the next call and the whole model compiles a second time (the paper
    model on CPU: 45 s, then 12-14 s more; docs/training.md). Eval mode: no dropout, so no RNG is drawn."""
    compile_mode(mode or True)  # ValueError for an unknown mode, before any work
    was_training = model.training
    model.eval()
    with torch.no_grad(), torch.autocast(example.device.type, dtype=torch.bfloat16, enabled=amp):
        model(example[:1])
    model.train(was_training)
    return torch.compile(model, mode=mode)


def train_step(fwd, opt: torch.optim.Optimizer, params: list, xb: torch.Tensor, yb: torch.Tensor,
               valid: torch.Tensor | None, sums: tuple, *, ignore: int | None, amp: bool,
               grad_clip: float | None) -> None:
    """One optimizer step on the mean cross-entropy of the batch's counted examples (`counted_loss`), adding
    (loss sum, correct, counted) into the device tensors `sums`. No host synchronisation: nothing is read back
    (tests/test_fast_path.py runs it under a dispatch mode that fails on any read)."""
    with torch.autocast(xb.device.type, dtype=torch.bfloat16, enabled=amp):
        logits = fwd(xb)
    batch_loss, batch_correct, batch_counted = counted_loss(logits, yb, ignore, valid)
    loss = batch_loss / batch_counted.clamp(min=1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    for total, part in zip(sums, (batch_loss.detach(), batch_correct, batch_counted)):
        total += part


def optimizer_tensors(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """AdamW state as flat tensors: state.<param index>.<exp_avg|exp_avg_sq|step>."""
    out = {}
    for idx, st in opt.state_dict()["state"].items():
        for key, value in st.items():
            out[f"state.{idx}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    return out


def load_optimizer_tensors(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in tensors.items():
        if name.startswith("state."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = value
    sd = opt.state_dict()
    opt.load_state_dict({"state": state, "param_groups": sd["param_groups"]})


def checkpoint_due(epoch: int, epochs: int, every: int, stop_after_epochs: int | None) -> bool:
    """Commit a checkpoint after (0-based) `epoch`: every `every`-th epoch, the last, and where the run stops."""
    done = epoch + 1
    return done % every == 0 or done == epochs or (stop_after_epochs is not None and done >= stop_after_epochs)


def train_eval_due(tcfg: dict[str, Any], epoch: int) -> bool:
    """Evaluate the training subset after (0-based) `epoch`: every epoch (`train.train_eval` "every", the default),
    or only after the last ("last": the claims read only the last value)."""
    return tcfg.get("train_eval", "every") == "every" or epoch + 1 == tcfg["epochs"]


def startup_excess(c0: float, marks: list[float]) -> float:
    """The start-up a session's first epoch holds (the step's compilation, warm-up), by a clock read at the epoch's
    start (`c0`) and after each of its first two steps (`marks`): the first step's time beyond the second's (0 with
    fewer than two steps: the whole epoch is then taken as typical). A compiled evaluation's first call, in the
    epoch's evaluation, is not left out."""
    if len(marks) < 2:
        return 0.0
    return max(0.0, (marks[0] - c0) - (marks[1] - marks[0]))


class EpochTimer:
    """Whether a run stops at its deadline after an epoch (`train(deadline=...)`), by `clock`: the next epoch is
    judged to take as long as this one, its evaluation included (the session's first: less its start-up,
    `startup_excess`); with `must_finish`, it also stops once the epochs left, at the session's fastest epoch after
    its first (two timed at least), would end past the deadline."""

    def __init__(self, clock: Callable[[], float], deadline: float | None, epochs: int, start_epoch: int,
                 must_finish: bool):
        self.clock, self.deadline, self.epochs, self.start_epoch = clock, deadline, epochs, start_epoch
        self.must_finish, self.fastest, self.timed = must_finish, math.inf, 0
        self.c0, self.marks = 0.0, []

    def begin(self) -> None:
        """At an epoch's start."""
        self.c0, self.marks = self.clock(), []

    def stepped(self, epoch: int, i: int) -> None:
        """After step i of the epoch: the session's first two steps are timed (`startup_excess`)."""
        if epoch == self.start_epoch and i < 2:
            self.marks.append(self.clock())

    def ended(self, epoch: int) -> tuple[float, bool, bool]:
        """After the epoch and its evaluation: (the next epoch's seconds as judged, stop here, stopped because the
        run cannot finish)."""
        now, last = self.clock(), epoch + 1 >= self.epochs
        next_s = now - self.c0 - (startup_excess(self.c0, self.marks) if epoch == self.start_epoch else 0.0)
        if epoch > self.start_epoch:
            self.fastest, self.timed = min(self.fastest, now - self.c0), self.timed + 1
        if self.deadline is None or last:
            return next_s, False, False
        hopeless = (self.must_finish and self.timed >= 2
                    and now + (self.epochs - epoch - 1) * self.fastest > self.deadline)
        return next_s, hopeless or now + next_s > self.deadline, hopeless


def epoch_row(model, evals, tcfg: dict[str, Any], amp: bool, *, epoch: int, step: int, lr: float, sums, n: int,
              useful: int, computed: int, train_time: float, clock: Callable[[], float],
              static: bool = False) -> dict[str, Any]:
    """The metrics row of an epoch: the running means of its batches (`sums` = loss sum, correct, counted, on
    the device), then `model` evaluated on the test set and, when `train_eval_due`, on the fixed training subset
    (`evals` = x_test, y_test, x_sub, y_sub). clock(): the run's wall seconds so far, read after the evaluation.
    static: evaluation batches of one shape (a compiled model)."""
    x_test, y_test, x_sub, y_sub = evals
    trim_pads, ignore, ebs = tcfg.get("batching") == "length", tcfg.get("ignore_label"), tcfg["eval_batch_size"]
    test_loss, test_acc = evaluate(model, x_test, y_test, ebs, amp, trim_pads, ignore, static)
    sub = {}
    if train_eval_due(tcfg, epoch):
        sub_loss, sub_acc = evaluate(model, x_sub, y_sub, ebs, amp, trim_pads, ignore, static)
        sub = {"train_loss_eval": sub_loss, "train_acc_eval": sub_acc}
    loss_sum, correct, counted = sums
    n_counted = max(1, counted.item())
    return {"epoch": epoch + 1, "step": step, "lr": lr, "train_loss": loss_sum.item() / n_counted,
            "train_acc": correct.item() / n_counted, **sub,
            "test_loss": test_loss, "test_acc": test_acc, "epoch_time_s": train_time, "wall_s": clock(),
            "seq_per_s": n / train_time, "tok_per_s": useful / train_time, "pad_frac": 1 - useful / computed,
            "time": now_iso()}


def epoch_line(run_id: str, row: dict[str, Any], epochs: int) -> str:
    return (f"{run_id} epoch {row['epoch']}/{epochs}: train loss {row['train_loss']:.4f} acc {row['train_acc']:.4f} | "
            f"test loss {row['test_loss']:.4f} acc {row['test_acc']:.4f} | {row['seq_per_s']:.0f} seq/s")


def commit_epoch(run: Run, rows: list[dict[str, Any]], row: dict[str, Any], model, optim_t: dict | None,
                 state: dict[str, Any], *, dev: torch.device, cpu_time_s: float) -> None:
    """Record an epoch: append `row` to metrics.jsonl, commit a checkpoint (weights, `optim_t` = optimizer and
    RNG tensors, `state`) unless `optim_t` is None, and update run.json. FloatingPointError on a non-finite loss."""
    if not math.isfinite(row["train_loss"]):
        raise FloatingPointError(f"the training loss became {row['train_loss']} in epoch {row['epoch']}; "
                                 "lower train.lr or set train.grad_clip")
    rows.append(row)
    gpu = {"peak_gpu_mb": round(torch.cuda.max_memory_allocated(dev) / 2**20, 1)} if dev.type == "cuda" else {}
    with interrupts_deferred():  # Ctrl-C between these writes left run.json an epoch behind the checkpoint
        metrics_sha256 = run.write_metrics(rows)
        if optim_t is not None:
            run.save_checkpoint(model.state_dict(), optim_t, state)
        run.update_info(epoch=row["epoch"], wall_time_s=row["wall_s"], final=final_of(row),
                        peak_rss_mb=round(peak_rss_mb(), 1), cpu_time_s=cpu_time_s, metrics_sha256=metrics_sha256,
                        **gpu)


@contextlib.contextmanager
def tf32(dev: torch.device):
    """TF32 matmuls and convolutions for a CUDA training (the GPU runs' numerics: bf16 autocast, TF32), the flags
    restored after it, so an analysis later in the same process (a notebook, the demo) runs in full fp32."""
    if dev.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def final_of(row: dict[str, Any]) -> dict[str, Any]:
    """run.json's `final`: an epoch row's accuracies and losses."""
    return {k: row[k] for k in ("epoch", "train_loss", "train_acc", "train_acc_eval", "test_loss", "test_acc")
            if k in row}


def resync(run: Run, rows: list[dict[str, Any]], state: dict[str, Any]) -> None:
    """run.json's epoch, `final`, metrics digest and weights record as the committed checkpoint (`state`) and its
    metric rows left the run: a process killed after a checkpoint's commit point and before run.json was written
    left the epoch before there (a resume with no epoch left then read "finished" with the wrong numbers)."""
    weights = (state.get("files") or {}).get(MODEL)
    run.update_info(epoch=rows[-1]["epoch"], final=final_of(rows[-1]), metrics_sha256=run.write_metrics(rows),
                    **({"weights": {"sha256": weights, "epoch": state.get("epoch")}} if weights else {}))


def report_epoch(run: Run, row: dict[str, Any], epochs: int, progress: bool,
                 on_epoch: Callable[[Run, dict[str, Any]], None] | None) -> None:
    """After an epoch is committed: its line on the progress output, and the caller's callback."""
    if progress:
        from tqdm.auto import tqdm

        tqdm.write(epoch_line(run.id, row, epochs), file=sys.stderr)
    if on_epoch is not None:
        on_epoch(run, row)


def epoch_state(epoch: int, step: int, total_steps: int, steps_per_epoch: int, wall: float, lr: float,
                batching: str) -> dict[str, Any]:
    """state.json after `epoch` (0-based): where training stands, and how its batches are drawn."""
    return {"epoch": epoch + 1, "step": step, "total_steps": total_steps, "steps_per_epoch": steps_per_epoch,
            "wall_time_s": wall, "lr": lr,
            "shuffle": f"epoch_batches(lengths, batch_size, train.seed, epoch, {batching!r})"}


def resume_record(run: Run, resumed: bool, n_threads: int, dev: torch.device) -> dict[str, Any]:
    """run.json's thread and numerics fields for a training of `run` starting now (`resumed`: from its checkpoint):
    a resume keeps the thread count and numerics the run started with and records what this process changes
    (`resumed_threads`, `resumed_numerics`: `numerics_record`); on CPU each change warns, since the later epochs then
    follow another trajectory than an uninterrupted run's."""
    info = run.info
    started = info.get("threads") if resumed else None
    record = {"threads": started or n_threads, "resumed_threads": n_threads if resumed else None,
              **numerics_record(info, resumed)}
    if dev.type != "cpu":
        return record
    if started and started != n_threads:
        warnings.warn(f"run {run.id}: resuming with {n_threads} CPU threads, but it started with {started}; the "
                      f"result will not be bit-identical to an uninterrupted run (pass --threads {started})",
                      stacklevel=3)
    other = {k: v for k, v in (record["resumed_numerics"] or {}).items() if k != "threads"}
    if other:
        warnings.warn(f"run {run.id}: resuming on other numerics than it started on (" +
                      ", ".join(f"{k} {record['numerics'].get(k)} then, {v} now" for k, v in other.items()) +
                      "): its later epochs follow another trajectory than an uninterrupted run's; run.json records "
                      "both (resumed_numerics), and no single re-training can follow it bit for bit", stacklevel=3)
    return record


def kernel_choices(sdpa_backend: str | None) -> dict | None:
    """What PE-Lab's Triton kernel was autotuned to in this process (`triton_attention.tuned()`: the block of query
    rows per kernel and key, with every config's ms) where the run trained with it, else None. A config, not a field:
    the backward sums dK / dV over blocks of that many rows, so the choice can change the last bits of a GPU run."""
    if sdpa_backend != "triton":
        return None
    from workbench.model.triton_attention import tuned

    return tuned()


def session_record(run: Run, resumed: bool, now: dict[str, Any]) -> dict[str, Any]:
    """run.json's fields of a training session (`now`: device, amp, compiled, sdpa_backend, dataset_hash,
    code_version, torch_version, scheme_params: the scheme's kwargs with its defaults filled in, so that a default
    changed later cannot change silently what a stored run meant): as they are for a new run; for a resume the
    first session's are kept and each that differs now is recorded in `resumed_settings` ({field: [then, now]}, with
    a warning: the checkpoint's later epochs ran otherwise than its first). Refused where the data differ: the resume
    would train on other data."""
    if not resumed:
        return now
    info = run.info
    then = info.get("dataset_hash")
    if then and then != now["dataset_hash"]:
        raise StoreError(f"its data changed since it started (dataset hash {then[:12]} then, "
                         f"{str(now['dataset_hash'])[:12]} now): a resume would train it on other data; restore the "
                         "data it started on, or train it again from the start (--force)", run.id)
    changed = {k: [info[k], v] for k, v in now.items() if k in info and info[k] != v}
    if changed:
        warnings.warn(f"run {run.id}: resumed with other settings than it started with (" + ", ".join(
            f"{k} {a} then, {b} now" for k, (a, b) in changed.items()) + "); run.json keeps the first session's, "
            "records the change (resumed_settings) and each kept session's epochs and settings (sessions)",
            stacklevel=3)
    return {k: info.get(k, v) for k, v in now.items()} | {
        "resumed_settings": changed or None}


def load_split(store: RunStore, task: dict[str, Any], dev: torch.device):
    """The task's dataset (cached by the store) and its train and test token ids and labels as int64 on `dev`."""
    ds = store.load_task(task)
    return (ds, *(torch.from_numpy(a).long().to(dev) for a in (ds.train_x, ds.train_y, ds.test_x, ds.test_y)))


def zero_sums(dev: torch.device, shape: tuple[int, ...] = ()) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An epoch's running loss, correct and counted sums (one each a packed run: `shape` (K,)), kept on the device
    and read once the epoch ends (`epoch_row`)."""
    return (torch.zeros(shape, device=dev), torch.zeros(shape, device=dev, dtype=torch.long),
            torch.zeros(shape, device=dev, dtype=torch.long))


def restore(run: Run, ckpt, model, opt: torch.optim.Optimizer) -> tuple[int, int, float, list[dict[str, Any]]]:
    """Load a checkpoint (`Run.load_checkpoint`; None: a fresh start) into `model` and `opt` and the global torch RNG;
    run.json and the metrics as the checkpoint left the run (`resync`). Returns (epochs done, steps done, wall
    seconds before this session, the metric rows kept)."""
    if ckpt is None:
        return 0, 0, 0.0, []
    model_t, optim_t, state = ckpt
    model.load_state_dict(model_t, strict=True)
    load_optimizer_tensors(opt, optim_t)
    if "rng.torch" in optim_t:
        torch.set_rng_state(optim_t["rng.torch"])
    rows = [r for r in run.metric_rows() if r["epoch"] <= state["epoch"]]
    if rows:
        resync(run, rows, state)
    return state["epoch"], state["step"], state.get("wall_time_s", 0.0), rows


def step_batch(xb: torch.Tensor, yb: torch.Tensor, size: int, *, static: bool, trim_pads: bool):
    """A training batch as the step takes it: (x, y, valid rows or None). static (a compiled step, one shape): a
    short last batch padded to `size` with ignored rows (`pad_batch`), pads not trimmed; else trimmed to its
    longest sequence when `trim_pads` (train.batching "length")."""
    if static and len(xb) < size:
        return pad_batch(xb, yb, size)
    return (trim(xb) if trim_pads and not static else xb), yb, None


def stop_if_asked(epoch: int, epochs: int, stop_after_epochs: int | None) -> None:
    """StopTraining after epoch `epoch` (0-based) when it completes `stop_after_epochs` and epochs remain."""
    if stop_after_epochs is not None and epoch + 1 >= stop_after_epochs and epoch + 1 < epochs:
        raise StopTraining(f"stopped after epoch {epoch + 1} (stop_after_epochs)")


SESSION_FIELDS = ("code_version", "device", "amp", "compiled", "sdpa_backend", "torch_version")


def kept_sessions(info: dict[str, Any], start_epoch: int) -> list[dict[str, Any]]:
    """The earlier training sessions whose epochs a resume from epoch `start_epoch` keeps (run.json `sessions`:
    each {from_epoch, SESSION_FIELDS}); a session that started at `start_epoch` or later left no checkpoint the
    resume keeps, so it is dropped. A run from before `sessions` (2026-12-07): its first session's fields from epoch
    0, then its last resume's (`resumed_settings`' later values from `resumed_from_epoch`) where it recorded one."""
    past = info.get("sessions")
    if past is None:
        first = {"from_epoch": 0, **{k: info.get(k) for k in SESSION_FIELDS}}
        later = info.get("resumed_settings") or {}
        past = [first] + ([first | {"from_epoch": info["resumed_from_epoch"]}
                           | {k: v[-1] for k, v in later.items() if k in SESSION_FIELDS}]
                          if later and info.get("resumed_from_epoch") else [])
    return [s for s in past if s["from_epoch"] < start_epoch]


def mark_running(run: Run, *, resumed: bool, start_epoch: int, n_threads: int, dev: torch.device, amp: bool,
                 compiled: bool | str, sdpa_backend: str | None, dataset_hash: str, scheme_params: dict[str, Any],
                 epochs: int, checkpoint_every: int, **extra: Any) -> None:
    """Mark `run` running and write run.json's fields of this training session: threads and numerics
    (`resume_record`), the session's settings (`session_record`: a resume keeps the first session's; `sessions`:
    each kept session's, from the epoch it started at), device, machine and process; `extra`: the caller's own
    fields (a pack's `packed`, a deadline's)."""
    kept = kept_sessions(run.info, start_epoch) if resumed else []
    now = dict(device=str(dev), amp=amp, compiled=compiled, sdpa_backend=sdpa_backend, dataset_hash=dataset_hash,
               **run.record_code(resumed=resumed, kept_dirty=any(
                   str(s.get("code_version") or "").endswith("-dirty") for s in kept)),
               torch_version=torch.__version__, scheme_params=dict(scheme_params))
    session = session_record(run, resumed, now)
    sessions = kept + [{"from_epoch": start_epoch if resumed else 0, **{k: now[k] for k in SESSION_FIELDS}}]
    run.update_info(status="running", started=now_iso(), **resume_record(run, resumed, n_threads, dev), **session,
                    sessions=sessions,
                    gpu=torch.cuda.get_device_name(dev) if dev.type == "cuda" else None, epochs=epochs,
                    resumed_from_epoch=start_epoch if resumed else None,
                    omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), error=None, machine=machine_identity(),
                    checkpoint_every=checkpoint_every, **extra, **process_identity())


def mark_ended(runs: list[Run], e: BaseException) -> None:
    """Record in run.json why training left its loop early: *interrupted* (Ctrl-C, `StopTraining`: resumable) or
    *failed* (any other error, with its message; best effort, so that the error itself is what propagates)."""
    for r in runs:
        if isinstance(e, (KeyboardInterrupt, StopTraining)):
            r.update_info(status="interrupted", interrupted=now_iso(), error=str(e) or type(e).__name__)
        else:
            with contextlib.suppress(Exception):
                r.update_info(status="failed", failed=now_iso(), error=f"{type(e).__name__}: {e}")


def train(config: dict[str, Any] | Run, store: RunStore | None = None, *, resume: bool = False,
          force: bool = False, device: str | None = None, compile: bool | str = False,
          amp: bool | None = None, sdpa_backend: str | None = None,
          threads: int | None = None, progress: bool = True, stop_after_epochs: int | None = None,
          on_epoch: Callable[[Run, dict[str, Any]], None] | None = None, checkpoint_every: int = 1,
          deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
          must_finish: bool = False) -> Run:
    """Train the run described by `config` (a resolved run config, or an existing Run) and return its Run.

    resume: continue from the last checkpoint if the run exists unfinished (else StoreError).
    force: delete an existing run with this id and start over.
    stop_after_epochs: stop (status `interrupted`, resumable) once this many epochs are done.
    on_epoch(run, metrics_row): called after every recorded epoch (may raise to abort).
    checkpoint_every: commit a checkpoint every N epochs (and after the last); results do not depend on it, a
    resume replays from the last checkpoint (fewer writes, more epochs to replay after a crash).
    deadline: a time of `clock()` (seconds) by which to stop: after an epoch whose successor would end past it
    (judged by the epoch just done, evaluation included; the session's first less its start-up, `startup_excess`,
    run.json `epoch_estimate_s`), commit a checkpoint and stop (status `interrupted`, resumable; run.json
    `stopped_at_deadline`). must_finish: a run that cannot finish by the deadline is of no use
    (a lent GPU whose checkpoints do not outlive the window): stop as soon as the epochs left, each as long as the
    fastest of this session's epochs after its first (which holds the compilation; two of them at least), would end
    past it, and leave the time to runs that fit (`sweep --no-partial`).
    compile: torch.compile the model, one batch shape (`pad_batch`), fused capturable AdamW with a tensor lr
    (`make_optimizer`); same math, other kernels (and other dropout draws), so not bit-identical to eager. True:
    torch.compile's default mode; a mode name of COMPILE_MODES (`compile_mode`): that mode (run.json `compiled`).
    sdpa_backend: train with SDPA trying this backend of SDPA_BACKENDS first (`sdpa_backend_context`; None: PyTorch's
    choice, e.g. cuDNN's on an H100); run.json `sdpa_backend`.
    A finished run is returned as is.
    """
    store = store if store is not None else (config.store if isinstance(config, Run) else RunStore())
    if isinstance(config, Run):
        config = config.config
    from .presets import validate_config

    validate_config(config)  # bad configs and arguments fail before anything is written
    compile = compile_mode(compile)
    backend = sdpa_backend_context(sdpa_backend)  # ValueError for an unknown backend, before anything is written
    dev = pick_device(device)
    check_threads(threads)
    check_checkpoint_every(checkpoint_every)
    from .presets import check_gpu_memory

    check_gpu_memory(config, dev)
    run_id = store.run_id(config)
    lock = store.lock(run_id).acquire()  # RunLocked at once when another process trains this run
    try:
        if force and store.exists(run_id):
            store.delete(run_id, lock=lock)
        fresh = not store.exists(run_id)
        try:
            with backend, tf32(dev):
                return _train_locked(store.create(config), store, resume=resume, dev=dev, compile=compile, amp=amp,
                                     threads=threads, progress=progress, stop_after_epochs=stop_after_epochs,
                                     on_epoch=on_epoch, checkpoint_every=checkpoint_every, deadline=deadline,
                                     clock=clock, sdpa_backend=sdpa_backend, must_finish=must_finish)
        except BaseException as e:  # failed before its first epoch: leave no half-made run behind
            run = Run(store, run_id)
            if fresh and not run.has_checkpoint():
                store.delete(run_id, lock=lock)
            elif not isinstance(e, (StoreError, KeyboardInterrupt)):
                with contextlib.suppress(StoreError):
                    if run.info.get("status") == "created":
                        run.update_info(status="failed", failed=now_iso(), error=f"{type(e).__name__}: {e}")
            raise
    finally:
        lock.release()


def _train_locked(run: Run, store: RunStore, *, resume: bool, dev: torch.device, compile: str | None,
                  amp: bool | None, threads: int | None, progress: bool, stop_after_epochs: int | None,
                  on_epoch: Callable[[Run, dict[str, Any]], None] | None, checkpoint_every: int = 1,
                  deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
                  sdpa_backend: str | None = None, must_finish: bool = False) -> Run:
    """`train` once the run's lock is held and its folder exists (in `sdpa_backend`'s context)."""
    info = run.info
    if run.status == "finished":
        return run
    if run.has_checkpoint() and not resume:
        raise StoreError(f"exists unfinished (status {run.status!r}, epoch {info.get('epoch', 0)}); "
                         "pass resume=True (--resume) to continue it or force=True (--force) to restart", run.id)

    cfg, tcfg = run.config, run.config["train"]
    amp = (dev.type == "cuda") if amp is None else amp
    n_threads = set_threads(threads)

    ds, x_train, y_train, x_test, y_test = load_split(store, cfg["task"], dev)

    from workbench.model import PEClassifier
    from workbench.model.attention import use_fused_dropout

    model = PEClassifier(run.model_config()).to(dev)
    use_fused_dropout(model, tcfg.get("fused_attention", False))
    opt = make_optimizer(model, tcfg, dev, compile)
    params = list(model.parameters())
    bs, epochs, seed, ignore = tcfg["batch_size"], tcfg["epochs"], tcfg["seed"], tcfg.get("ignore_label")
    batching = tcfg.get("batching", "random")
    trim_pads = batching == "length"
    if trim_pads and not model.cfg.pads_are_inert:
        raise ValueError("train.batching='length' trims pads, but this model attends to or pools its pads "
                         "(an authors' setting); use train.batching='random'")
    lengths = (x_train != 0).sum(1).cpu()
    n = len(x_train)
    sub = train_subset(n, len(x_test), seed).to(dev)
    evals = (x_test, y_test, x_train[sub], y_train[sub])
    steps_per_epoch = math.ceil(n / bs)
    total_steps = steps_per_epoch * epochs

    ckpt = run.load_checkpoint() if resume else None
    start_epoch, step, wall_before, rows = restore(run, ckpt, model, opt)
    if compile:  # a fresh compile cache per run: dynamo's recompile limit (8 per function) would otherwise
        torch._dynamo.reset()  # leave the later runs of a sweep's process silently eager
    fwd = compiled(model, x_train[:1], amp, compile) if compile else model
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)

    mark_running(run, resumed=ckpt is not None, start_epoch=start_epoch, n_threads=n_threads, dev=dev, amp=amp,
                 compiled=True if compile == "default" else (compile or False), sdpa_backend=sdpa_backend,
                 dataset_hash=ds.hash, scheme_params=model.scheme.kw, epochs=epochs,
                 checkpoint_every=checkpoint_every, stopped_at_deadline=None, epoch_estimate_s=None)
    t_session, cpu_session = time.perf_counter(), time.process_time()
    cpu_before = run.info.get("cpu_time_s", 0.0) if ckpt else 0.0
    try:
        from tqdm.auto import tqdm

        timer = EpochTimer(clock, deadline, epochs, start_epoch, must_finish)
        for epoch in range(start_epoch, epochs):
            torch.manual_seed(derive_seed(seed, epoch, "torch"))  # dropout masks (all devices)
            batches = epoch_batches(lengths, bs, seed, epoch, batching)
            batches = torch.cat(batches).to(dev).split([len(b) for b in batches])  # one copy to the device
            model.train()
            loss_sum, correct, counted = zero_sums(dev)
            computed = 0
            t0 = time.perf_counter()
            timer.begin()
            # the bar only on a terminal; a log file gets the one line per epoch below
            bar = tqdm(range(steps_per_epoch), desc=f"{run.id} {epoch + 1}/{epochs}", leave=False,
                       disable=not (progress and sys.stderr.isatty()), file=sys.stderr, dynamic_ncols=True)
            for i in bar:
                idx = batches[i]
                xb, yb, valid = step_batch(x_train[idx], y_train[idx], bs, static=bool(compile), trim_pads=trim_pads)
                lr = lr_at(step, total_steps, tcfg)
                set_lr(opt, lr)
                train_step(fwd, opt, params, xb, yb, valid, (loss_sum, correct, counted), ignore=ignore, amp=amp,
                           grad_clip=tcfg.get("grad_clip"))
                step += 1
                timer.stepped(epoch, i)
                computed += len(idx) * xb.shape[1]
                if not bar.disable and (i % 10 == 0 or i == steps_per_epoch - 1):
                    seen = max(1, counted.item())
                    bar.set_postfix(loss=f"{loss_sum.item() / seen:.3f}", acc=f"{correct.item() / seen:.3f}",
                                    lr=f"{lr:.2e}")
            bar.close()
            if dev.type == "cuda":  # the epoch's kernels done before its time is read
                torch.cuda.synchronize(dev)
            train_time = time.perf_counter() - t0
            row = epoch_row(fwd, evals, tcfg, amp, epoch=epoch, step=step, lr=lr, sums=(loss_sum, correct, counted),
                            n=n, useful=int(lengths.sum()), computed=computed, train_time=train_time,
                            clock=lambda: wall_before + time.perf_counter() - t_session, static=bool(compile))
            wall = row["wall_s"]
            next_s, at_deadline, hopeless = timer.ended(epoch)
            if deadline is not None and epoch == start_epoch:  # for a window's planner (`sweep.Window.timed`)
                run.update_info(epoch_estimate_s=next_s)
            checkpoint = checkpoint_due(epoch, epochs, checkpoint_every, stop_after_epochs) or at_deadline
            rng = {"rng.torch": torch.get_rng_state()} | (
                {"rng.cuda": torch.cuda.get_rng_state(dev)} if dev.type == "cuda" else {})
            commit_epoch(run, rows, row, model, (optimizer_tensors(opt) | rng) if checkpoint else None,
                         epoch_state(epoch, step, total_steps, steps_per_epoch, wall, lr, batching),
                         dev=dev, cpu_time_s=cpu_before + time.process_time() - cpu_session)
            report_epoch(run, row, epochs, progress, on_epoch)
            stop_if_asked(epoch, epochs, stop_after_epochs)
            if at_deadline:
                run.update_info(stopped_at_deadline=epoch + 1, triton_tuned=kernel_choices(sdpa_backend))
                raise StopTraining(f"stopped after epoch {epoch + 1}: " + (
                    f"its {epochs - epoch - 1} epochs left would end past the deadline (must finish)" if hopeless
                    else "the next would end past the deadline"))
    except BaseException as e:
        mark_ended([run], e)
        if isinstance(e, StopTraining):
            return run
        raise
    run.update_info(status="finished", finished=now_iso(), wall_time_s=wall_before + time.perf_counter() - t_session,
                    cpu_time_s=cpu_before + time.process_time() - cpu_session, machine_at_finish=machine_identity(),
                    triton_tuned=kernel_choices(sdpa_backend))
    return run
