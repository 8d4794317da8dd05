"""The mixed-precision path (bf16 autocast, as on CUDA) exercised on CPU so it does not rot without a GPU."""
import math

import torch

from workbench.store import RunStore
from workbench.train import evaluate, resolve_config, train

TINY = ["model.d_model=32", "model.n_heads=4", "model.d_ff=64", "model.n_layers=2", "task.n_examples=600",
        "train.batch_size=32", "train.epochs=3"]
# bf16 keeps 8 bits of mantissa (relative step 2^-8 = 0.4 %): logits of a small model in bf16 autocast stay
# within 0.15 of fp32, the mean test loss within 2 %, and at most 3 % of the predictions flip (near-ties).
LOGIT_ATOL, LOSS_RTOL, MAX_FLIPS = 0.15, 0.02, 0.03


def test_bf16_autocast_trains_on_cpu_and_its_eval_matches_fp32(tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "rope", "trigger-distance", sets=TINY, store=store)
    run = train(cfg, store, amp=True, progress=False, threads=1, device="cpu")
    assert run.status == "finished" and run.info["amp"] is True
    rows = run.metric_rows()
    assert all(math.isfinite(r["train_loss"]) and math.isfinite(r["test_loss"]) for r in rows)
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]  # it learns under autocast

    model, ds = run.load_model("cpu"), run.load_dataset()
    x, y = torch.as_tensor(ds.test_x), torch.as_tensor(ds.test_y)
    with torch.no_grad():
        fp32 = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = model(x).float()
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, fp32)  # autocast really ran in bf16
    assert (bf16 - fp32).abs().max().item() < LOGIT_ATOL
    assert (bf16.argmax(-1) != fp32.argmax(-1)).float().mean().item() <= MAX_FLIPS
    loss32, acc32 = evaluate(model, x, y, 256, amp=False)
    loss16, acc16 = evaluate(model, x, y, 256, amp=True)
    assert abs(loss16 - loss32) <= LOSS_RTOL * loss32 and abs(acc16 - acc32) <= MAX_FLIPS
    assert rows[-1]["test_loss"] == loss16  # the loop's eval ran under autocast too
