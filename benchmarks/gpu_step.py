"""The training step on a GPU, eager against compiled (issue 41), in one process, as `benchmarks/gpu_check.sh` runs it.

For the tier-1 runs of grids/paper.toml (RoPE and NoPE with the authors' transformer settings, MLA with the authors'
MLA settings; `--preset paper` on CUDA), on random right-padded batches of the preset's shape (no data to make):

  - step: ms per training step (forward, loss, backward, AdamW; bf16 autocast on CUDA), eager and compiled
    (`loop.train_step` as `train` runs it: `make_optimizer`, `set_lr`), the median of `--steps` steps timed with
    CUDA events (perf_counter on CPU) after warm-up; the compile time (first compiled steps) beside it;
  - mask: RoPE's eager step with the attention pad mask (one bf16 mask per batch) against none (`attn_mask=None`,
    flash kernels possible); eager only, to spend no compile time on it (`--no-mask`: left out);
  - agree: `--agree-steps` steps eager and compiled from the same weights on the same batches at dropout 0: the
    largest per-step loss difference and the last 50 steps' mean of each (bf16 tolerance, not bit-equality;
    `--agree-steps 0`: left out);
  - sdpa (`--sdpa a,b`): RoPE's eager step with SDPA held to each backend in turn (flash, memory-efficient,
    cuDNN, math), after the first step's A/B and profile; `triton` (PE-Lab's kernel, `model.triton_attention`)
    first checked against SDPA (`kernel_agreement`: RoPE's and MLA's shapes, forward and gradients, to fp32 math),
    then timed eager and compiled, only where it agrees;
  - kv_ab (`--kv-ab`): RoPE's compiled step with the fused key/value projection split (the model's) and indexed
    as before 2026-11-27 (`indexed_memory_kv`), one after the other on the same batches;
  - modes (`--modes a,b`): the first scheme's step compiled in other torch.compile modes (CUDA graphs:
    reduce-overhead), last, each with its compile time (`warmup_s`);
  - profile (`--profile`): 20 compiled steps of the first scheme under torch.profiler, the top kernels by self
    device time a step (self CPU time on CPU);
  - epoch (`--epoch`): two full Task 1 epochs of RoPE through `train(compile=True)`, the data made first (its time
    reported too): the second epoch's training and wall time with its evaluation, the first's wall (compilation).

The compiles are what takes time (each model shape once; inductor's cache serves a repeat, e.g. the epoch's training
graph is the RoPE step's). Writes `step_ms` ({scheme: compiled ms per step}, what `workbench sweep --step-ms` reads) and every figure to
`--json`, rewritten as each part ends, so a run cut short keeps its parts.

    python benchmarks/gpu_step.py --json OUT/gpu_step.json [--steps 100] [--agree-steps 300] [--profile] [--epoch]
    python benchmarks/gpu_step.py --device cpu --preset smoke --steps 5 --agree-steps 10 --epoch   # dry run
    python benchmarks/gpu_step.py --kernel-check OUT/kernel_check.json   # the Triton kernel's agreement alone
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from workbench.model import ModelConfig, PEClassifier  # noqa: E402
from workbench.model.attention import Attention, use_fused_dropout  # noqa: E402
from workbench.store import RunStore, code_version  # noqa: E402
from workbench.train import resolve_config, train  # noqa: E402
from workbench.train.loop import (compile_mode, compiled, make_optimizer, sdpa_backend_context,  # noqa: E402
                                  set_lr, train_step, zero_sums)
from workbench.train.presets import task_spec  # noqa: E402

TIER1 = {"rope": ("rope", "authors"), "nope": ("nope", "authors"), "mla": ("mla", "authors-mla")}


def batches(cfg: dict, n: int, dev: torch.device, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`n` random batches of the config's shape, right-padded to random lengths, labels in range."""
    spec, m = task_spec(cfg["task"]), cfg["model"]
    bs, length = cfg["train"]["batch_size"], spec.seq_len
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(1, m["vocab_size"], (bs, length), generator=g)
        keep = torch.arange(length)[None, :] < torch.randint(length // 4, length + 1, (bs, 1), generator=g)
        out.append(((x * keep).to(dev), torch.randint(0, m["n_classes"], (bs,), generator=g).to(dev)))
    return out


def build(cfg: dict, dev: torch.device, compile: bool, example: torch.Tensor, amp: bool, mode: str | None = None,
          patch=None):
    """(model, what the step calls: the model or `loop.compiled(model, ...)` as `train` compiles it, AdamW);
    `patch(model)`, before compiling: a reference variant to time side by side."""
    if compile:
        torch._dynamo.reset()  # each measurement compiles afresh (dynamo's recompile limit is per process)
    model = PEClassifier(ModelConfig.from_dict(cfg["model"])).to(dev).train()
    if patch is not None:
        patch(model)
    use_fused_dropout(model, cfg["train"].get("fused_attention", False))
    opt = make_optimizer(model, cfg["train"], dev, compile)
    return model, (compiled(model, example, amp, mode) if compile else model), opt


def run_steps(cfg: dict, dev: torch.device, compile: bool, data: list, amp: bool, timed: bool = True, prof=None,
              mode: str | None = None, patch=None):
    """(per-step ms after warm-up, per-step losses, seconds of the warm-up steps); `prof`, a torch.profiler
    profile not yet started, records the steps after the warm-up; `patch`: `build`'s."""
    model, fwd, opt = build(cfg, dev, compile, data[0][0], amp, mode, patch)
    params = list(model.parameters())
    tcfg = cfg["train"]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    zero = zero_sums(dev)
    warm = 3 if timed else 0
    t0 = time.perf_counter()
    losses, ms = [], []
    for i, (xb, yb) in enumerate(data):
        if i == warm:
            sync()
            warm_s = time.perf_counter() - t0
            if prof is not None:
                prof.start()
        sums = tuple(torch.zeros_like(z) for z in zero)
        set_lr(opt, tcfg["lr"])
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            c0 = time.perf_counter()
        train_step(fwd, opt, params, xb, yb, None, sums, ignore=tcfg.get("ignore_label"), amp=amp,
                   grad_clip=tcfg.get("grad_clip"))
        if dev.type == "cuda":
            end.record()
            ms.append((start, end))
        else:
            ms.append((time.perf_counter() - c0) * 1000)
        losses.append(sums[0] / sums[2].clamp(min=1))
    sync()
    if prof is not None:
        prof.stop()
    if warm == 0:
        warm_s = 0.0
    if dev.type == "cuda":
        ms = [s.elapsed_time(e) for s, e in ms]
    return ms[warm:], [float(v) for v in torch.stack(losses).tolist()], warm_s


def profile_rows(averages, cuda: bool) -> tuple[str, list]:
    """(the time attribute, the rows to rank): on CUDA the device's kernels only (`self_device_time_total` of
    events whose device is the GPU). An operator's row also carries its kernels' device time, and a Triton
    kernel's launch is a CPU row named as its kernel, so ranking every row counted each kernel twice (the H100
    check of 2026-11-27: 29.2 ms "a step" for a 15.9-ms step). On CPU every operator by its own CPU time."""
    from torch.autograd import DeviceType

    if cuda:
        key = "self_device_time_total"
        return key, [e for e in averages if e.device_type == DeviceType.CUDA and getattr(e, key, 0) > 0]
    key = "self_cpu_time_total"
    return key, [e for e in averages if getattr(e, key, 0) > 0]


def indexed_memory_kv(model) -> None:
    """The reference for `--kv-ab`: `memory_kv` as it was before 2026-11-27, each layer's k and v indexed out of a
    [..., layer, k|v, head, d_head] view (its gradient a sum of select_backwards: one H100 kernel of 1.5 ms that
    loaded every layer's gradient for each element). Same values as the split it was replaced by."""
    def memory_kv(memory):
        n = model.cfg.n_layers
        kv = model.kv_projection(memory).unflatten(-1, (n, 2, model.cfg.n_heads, model.cfg.d_head))
        return [(kv[..., layer, 0, :, :], kv[..., layer, 1, :, :]) for layer in range(n)]

    model.memory_kv, model.fused_kv = memory_kv, True


def fused_memory_kv(model) -> None:
    """The model's own `memory_kv`, taken on any device (CUDA takes it by itself): `--kv-ab`'s other side."""
    model.fused_kv = True


def kernel_agreement(cfgs: list[dict], dev: torch.device, amp: bool, seed: int = 0, op_steps: int = 0) -> dict:
    """PE-Lab's Triton attention (`model.triton_attention.attention`) against SDPA at each config's attention
    shape (batch, heads, positions; query/key width d_head + MLA's d_rope, value width d_head), dropout 0, in the
    step's dtype: each one's largest error in the output and the q, k, v gradients against fp32 math SDPA on the
    same inputs. `ok`: the kernel's every error is at most twice SDPA's + 1e-3 (bf16 rounding, not bit-equality).
    Whether the kernel runs there at all: `runs_here`. `op_steps` > 0: also each one's forward + backward alone,
    the median ms of that many after 3 (the autotuner's choice among them: `tuned`), side by side, at the config's
    attention dropout where it trains with it inside attention (`op_ms`, `op_dropout`), and without (`op_ms_p0`)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from workbench.model.triton_attention import attention, runs_here, tuned

    dtype = torch.bfloat16 if amp else torch.float32
    g = torch.Generator(device=dev).manual_seed(seed)
    rows = {}
    for cfg in cfgs:
        m = cfg["model"]
        B, H, L = cfg["train"]["batch_size"], m["n_heads"], task_spec(cfg["task"]).seq_len
        layer = next(x for x in PEClassifier(ModelConfig.from_dict(m)).modules() if isinstance(x, Attention))
        dv = layer.cfg.d_head
        dk = dv + getattr(layer, "d_rope", 0)  # MLA's queries and keys: d_head + d_rope
        q, k = (torch.randn(B, L, H, dk, generator=g, device=dev, dtype=dtype).transpose(1, 2) for _ in range(2))
        v = torch.randn(B, L, H, dv, generator=g, device=dev, dtype=dtype).transpose(1, 2)
        dz = torch.randn(B, H, L, dv, generator=g, device=dev, dtype=dtype)

        def run(fn, cast):
            ins = [t.detach().to(cast).requires_grad_() for t in (q, k, v)]
            z = fn(*ins)
            return [z.float(), *(t.float() for t in torch.autograd.grad(z, ins, dz.to(cast)))]

        with sdpa_kernel(SDPBackend.MATH):
            ref = run(F.scaled_dot_product_attention, torch.float32)
        err = {name: [(a - b).abs().max().item() for a, b in zip(run(fn, dtype), ref)]
               for name, fn in (("triton", attention), ("sdpa", F.scaled_dot_product_attention))}
        rows[m["scheme"]] = {"shape": [B, H, L, dk, dv], "runs_here": runs_here(q, k, v, None),
                             "triton_err": err["triton"], "sdpa_err": err["sdpa"],
                             "ok": all(t <= 2 * s + 1e-3 for t, s in zip(err["triton"], err["sdpa"]))}
        if op_steps:  # the op and its backward alone: inputs made once, no casts in the timing; at the run's
            # attention dropout (the paper preset's training call: 0.1) and, where that is not 0, without
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            p = layer.attn_dropout.p if cfg["train"].get("fused_attention") else 0.0
            for key, drop in (("op_ms", p), ("op_ms_p0", 0.0))[:2 if p > 0 else 1]:
                rows[m["scheme"]][key] = {
                    name: op_ms(lambda: torch.autograd.grad(fn(*leaves, None, drop), leaves, dz), dev, op_steps)
                    for name, fn in (("triton", attention), ("sdpa", F.scaled_dot_product_attention))}
            rows[m["scheme"]]["op_dropout"] = p
    out = {"ok": all(r["ok"] and r["runs_here"] for r in rows.values()), "what": "[z, dq, dk, dv] max abs error",
           **rows}
    return dict(out, tuned=tuned()) if op_steps else out


def _triton_version() -> str | None:
    """The installed Triton's version (the compiler of PE-Lab's kernel and of inductor's GPU kernels), or None."""
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def op_ms(fn, dev: torch.device, n: int) -> float:
    """The median ms of `fn()` over n calls after 3 (CUDA events on a GPU, perf_counter on CPU)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(n):
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def parse_modes(text: str) -> list[str]:
    """--modes "a,b": torch.compile modes (`loop.compile_mode`); SystemExit naming the modes on a wrong one."""
    try:
        return [compile_mode(m) for m in text.split(",") if m]
    except ValueError as e:
        raise SystemExit(f"--modes {text!r}: {e}") from None


def tier1_config(scheme: str, preset: str, sets: list[str]) -> dict:
    name, fidelity = TIER1[scheme]
    return resolve_config(preset, name, "trigger-distance", fidelity=fidelity, sets=sets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cuda = torch.cuda.is_available()
    ap.add_argument("--device", default="cuda" if cuda else "cpu")
    ap.add_argument("--preset", default=None, help="default: paper on CUDA, smoke on CPU")
    ap.add_argument("--schemes", default="rope,mla,nope")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per measurement (median)")
    ap.add_argument("--agree-steps", type=int, default=300, help="0: no agreement check")
    ap.add_argument("--no-mask", action="store_true", help="without the pad mask's step")
    ap.add_argument("--epoch", action="store_true", help="also one full Task 1 epoch with evaluation (makes data)")
    ap.add_argument("--profile", action="store_true", help="also profile 20 compiled steps of the first scheme")
    ap.add_argument("--profile-rows", type=int, default=25)
    ap.add_argument("--sdpa", default="", help="SDPA backends to time RoPE's eager step with, one at a time, e.g. "
                                               "flash_attention,efficient_attention,cudnn_attention,math")
    ap.add_argument("--modes", default="", help="other torch.compile modes to time the first scheme's step in, "
                                                 "e.g. reduce-overhead (CUDA graphs)")
    ap.add_argument("--kv-ab", action="store_true", help="also RoPE's compiled step with the fused key/value "
                                                          "projection indexed as before its split (side by side)")
    ap.add_argument("--kernel-check", type=Path, default=None, metavar="JSON",
                    help="only the Triton attention kernel's agreement with SDPA (RoPE's and MLA's shapes) into "
                         "JSON; exit 1 where it does not agree (gpu_window.sh, SDPA_BACKEND=triton)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="override for every config")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    modes = parse_modes(a.modes)  # a wrong mode fails before anything is compiled
    dev = torch.device(a.device)
    amp = dev.type == "cuda"
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    preset = a.preset or ("paper" if dev.type == "cuda" else "smoke")
    if a.kernel_check:
        got = kernel_agreement([tier1_config(s, preset, a.sets) for s in ("rope", "mla")], dev, amp)
        a.kernel_check.write_text(json.dumps(dict(got, code_version=code_version(), preset=preset), indent=1))
        print(f"kernel agreement: {'ok' if got['ok'] else 'FAILED'}", flush=True)
        sys.exit(0 if got["ok"] else 1)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    out: dict = {"code_version": code_version(), "device": name, "torch": torch.__version__,
                 "triton": _triton_version(), "preset": preset,
                 "steps": a.steps, "step": {}, "step_ms": {}, "mask": {}, "agree": {}, "sdpa": {}, "modes": {},
                 "kv_ab": None, "epoch": None}

    def save(what: str) -> None:
        print(what, flush=True)
        if a.json:
            a.json.write_text(json.dumps(out, indent=1))

    def step(scheme: str) -> None:
        cfg = tier1_config(scheme, preset, a.sets)
        data = batches(cfg, a.steps + 3, dev)
        row = {"config_scheme": cfg["model"]["scheme"], "batch_size": cfg["train"]["batch_size"]}
        for mode, comp in (("eager", False), ("compiled", True)):
            ms, _, warm_s = run_steps(cfg, dev, comp, data, amp)
            row[f"{mode}_ms"], row[f"{mode}_warmup_s"] = statistics.median(ms), warm_s
        row["speedup"] = row["eager_ms"] / row["compiled_ms"]
        out["step"][scheme] = row
        out["step_ms"][cfg["model"]["scheme"]] = row["compiled_ms"]
        if "rope" in out["step"] and "mla" in out["step"]:
            out["mla_over_rope"] = out["step"]["mla"]["compiled_ms"] / out["step"]["rope"]["compiled_ms"]
        save(f"step {scheme}: eager {row['eager_ms']:.2f} ms, compiled {row['compiled_ms']:.2f} ms "
             f"({row['speedup']:.2f}x; compile {row['compiled_warmup_s']:.1f} s)")

    def backends() -> None:
        """RoPE's eager step with SDPA held to one backend at a time (flash, memory-efficient, cuDNN, math): which
        attention kernel the step's time depends on; a backend that cannot run the step is recorded as such."""
        from torch.nn.attention import SDPBackend, sdpa_kernel

        cfg = tier1_config("rope", preset, a.sets)
        data = batches(cfg, a.steps + 3, dev)
        for name in [b for b in a.sdpa.split(",") if b]:
            try:
                if name == "triton":
                    triton_backend(cfg, data)
                    continue
                with sdpa_kernel(getattr(SDPBackend, name.upper())):
                    out["sdpa"][name] = {"eager": statistics.median(run_steps(cfg, dev, False, data, amp)[0])}
            except (RuntimeError, AttributeError, ImportError, ValueError) as e:
                out["sdpa"][name] = {"error": str(e).splitlines()[0][:200]}
        save(f"sdpa: {out['sdpa']}")

    def triton_backend(cfg: dict, data: list) -> None:
        """PE-Lab's kernel: agreement with SDPA first (RoPE's and MLA's shapes), saved at once; the eager and
        compiled RoPE steps with it only where it agrees."""
        row = out["sdpa"]["triton"] = {"agree": kernel_agreement([cfg, tier1_config("mla", preset, a.sets)], dev,
                                                                 amp, op_steps=20)}
        save(f"sdpa triton: {row}")
        if row["agree"]["ok"]:
            with sdpa_backend_context("triton"):
                row["eager"] = statistics.median(run_steps(cfg, dev, False, data, amp)[0])
                save(f"sdpa triton: {row}")
                ms, _, row["compiled_warmup_s"] = run_steps(cfg, dev, True, data, amp)
                row["compiled"] = statistics.median(ms)

    def mask() -> None:
        base = tier1_config("rope", preset, a.sets)
        data = batches(base, a.steps + 3, dev)
        for label, masked in (("no_mask", False), ("pad_mask", True)):
            cfg = {**base, "model": {**base["model"], "attn_pad_mask": masked}}
            out["mask"][label] = {"eager": statistics.median(run_steps(cfg, dev, False, data, amp)[0])}
        save(f"mask: {out['mask']}")

    def agree() -> None:
        cfg = tier1_config("rope", preset, a.sets + ["model.dropout=0"])
        data = batches(cfg, a.agree_steps, dev, seed=1)
        curves = {mode: run_steps(cfg, dev, mode == "compiled", data, amp, timed=False)[1]
                  for mode in ("eager", "compiled")}
        tail = min(50, a.agree_steps)
        out["agree"] = {"steps": a.agree_steps, "dropout": 0.0,
                        "max_abs_diff": max(abs(x - y) for x, y in zip(curves["eager"], curves["compiled"])),
                        "eager_last_mean": statistics.fmean(curves["eager"][-tail:]),
                        "compiled_last_mean": statistics.fmean(curves["compiled"][-tail:]),
                        "first_loss": curves["eager"][0]}
        save(f"agree: {out['agree']}")

    def profile_step() -> None:
        """The first scheme's compiled step under torch.profiler: the top kernels by self device time a step
        (what the step's time is spent on, for the next change to the GPU path)."""
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        cfg = tier1_config(schemes[0], preset, a.sets)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        prof = torch_profile(activities=acts)
        run_steps(cfg, dev, True, batches(cfg, 23, dev), amp, prof=prof)  # 3 warm-up steps compile, 20 recorded
        key, events = profile_rows(prof.key_averages(), dev.type == "cuda")
        total = sum(getattr(e, key) for e in events) or 1.0
        top = sorted(events, key=lambda e: -getattr(e, key))[:a.profile_rows]
        out["profile"] = {"scheme": schemes[0], "steps": 20, "by": key, "total_ms_per_step": total / 1000 / 20,
                          "top": [{"name": e.key[:120], "ms_per_step": getattr(e, key) / 1000 / 20,
                                   "share": getattr(e, key) / total, "calls_per_step": e.count / 20} for e in top]}
        if schemes[0] in out["step"]:  # the kernels' time against the step's (CUDA events): how busy the GPU is
            out["profile"]["busy"] = out["profile"]["total_ms_per_step"] / out["step"][schemes[0]]["compiled_ms"]
        save("profile: " + "; ".join(f"{r['name'][:40]} {r['share']:.0%}" for r in out["profile"]["top"][:8]))

    def kv_ab() -> None:
        """The split against the indexing it replaced, in this process, on the same batches."""
        cfg = tier1_config("rope", preset, a.sets)
        data = batches(cfg, a.steps + 3, dev)
        row = {}
        for name, patch in (("split_ms", fused_memory_kv), ("indexed_ms", indexed_memory_kv)):
            row[name] = statistics.median(run_steps(cfg, dev, True, data, amp, patch=patch)[0])
        out["kv_ab"] = dict(row, indexed_over_split=row["indexed_ms"] / row["split_ms"])
        save(f"kv_ab: {out['kv_ab']}")

    # the first scheme's step, then the A/B and the profile of the step, the SDPA backends, the checks that read
    # RoPE, then the other schemes: a check cut short by its time limit keeps the parts that matter most (the JSON
    # is rewritten after each)
    schemes = a.schemes.split(",")
    step(schemes[0])
    if a.kv_ab:
        kv_ab()
    if a.profile:
        profile_step()
    if a.sdpa:
        backends()
    if a.agree_steps:
        agree()
    if not a.no_mask:
        mask()
    for scheme in schemes[1:]:
        step(scheme)
    for mode in modes:  # other torch.compile modes of the first scheme's step
        cfg = tier1_config(schemes[0], preset, a.sets)
        ms, _, warm_s = run_steps(cfg, dev, True, batches(cfg, a.steps + 3, dev), amp, mode=mode)
        out["modes"][mode] = {"scheme": schemes[0], "compiled_ms": statistics.median(ms), "warmup_s": warm_s}
        save(f"mode {mode}: {out['modes'][mode]}")

    if a.epoch:
        with tempfile.TemporaryDirectory() as tmp:
            store = RunStore(Path(tmp) / "runs", data_dir=Path(tmp) / "data")
            t0 = time.perf_counter()
            cfg = resolve_config(preset, "rope", "trigger-distance", fidelity="authors",
                                 sets=a.sets + ["train.epochs=2"], store=store)
            data_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            run = train(cfg, store, device=a.device, compile=True, progress=False)
            first, second = run.metric_rows()
            out["epoch"] = {"data_s": data_s, "first_wall_s": first["wall_s"], "train_s": second["epoch_time_s"],
                            "wall_s": second["wall_s"] - first["wall_s"], "total_s": time.perf_counter() - t0,
                            "test_acc": second["test_acc"], "steps_per_epoch": first["step"]}
        save(f"epoch: {out['epoch']}")


if __name__ == "__main__":
    main()
