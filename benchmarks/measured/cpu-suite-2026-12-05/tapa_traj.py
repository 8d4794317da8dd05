import math, sys, torch
from workbench.model import ModelConfig, PEClassifier
from workbench.store import RunStore
from workbench.train.loop import counted_loss, epoch_batches, lr_at
from workbench.train.presets import resolve_config
torch.set_num_threads(1)
betas = [float(b) for b in sys.argv[1].split(",")]
torch.manual_seed(0)
cfg = resolve_config("repro", "tapa", "trigger-distance"); t = cfg["train"]
ds = RunStore("/tmp/tapa_store").load_task(cfg["task"])
x, y = torch.from_numpy(ds.train_x).long(), torch.from_numpy(ds.train_y).long()
model = PEClassifier(ModelConfig.from_dict(cfg["model"]))
opt = torch.optim.AdamW(model.parameters(), lr=t["lr"], betas=tuple(betas), weight_decay=t["weight_decay"])
batches = epoch_batches((x != 0).sum(1), t["batch_size"], t["seed"], 0, t["batching"])
total = len(batches) * t["epochs"]
losses = []
for step in range(240):
    for g in opt.param_groups: g["lr"] = lr_at(step, total, t)
    s, _, n = counted_loss(model(x[batches[step]]), y[batches[step]], None)
    loss = s / n; opt.zero_grad(); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"]); opt.step(); losses.append(loss.item())
    if (step + 1) % 20 == 0:
        w_q = max(p.abs().max().item() for nm, p in model.named_parameters() if nm.endswith("W_Q"))
        print(step + 1, "first20 %.3f last20 %.3f wq %.3f" % (sum(losses[:20]) / 20, sum(losses[-20:]) / 20, w_q), flush=True)
