"""Multi-horizon load forecasting, DDP on CPU workers forked from the launcher.

The windows are built once in the launcher and shared with the workers through fork
(no copy, no pickling), which is why this uses start_method="fork".  Rank 0 runs
the validation with a compiled eval step (fullgraph, so we notice graph breaks).

    python forecast_ddp.py
"""
import os
import sys
import time
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

cfg = SimpleNamespace(
    data=SimpleNamespace(n_series=24, length=400, lookback=48, horizon=12, val_frac=0.2, seed=3),
    model=SimpleNamespace(hidden=32),
    optim=SimpleNamespace(lr=3e-3, epochs=2, batch=64),
    eval=SimpleNamespace(clip=10.0, compile=True),
    dist=SimpleNamespace(nprocs=2, port=29547),
)


def log(rank, *msg):
    print(f"{time.strftime('%H:%M:%S')} [r{rank}]", *msg, flush=True)


# ------------------------------------------------------------------ data (launcher)
def synth_load(d):
    g = torch.Generator().manual_seed(d.seed)
    t = torch.arange(d.length, dtype=torch.float32)
    base = 1.0 + torch.rand(d.n_series, 1, generator=g)
    daily = torch.sin(2 * torch.pi * t / 24)[None] * (0.5 + torch.rand(d.n_series, 1, generator=g))
    weekly = 0.3 * torch.sin(2 * torch.pi * t / 168)[None]
    noise = 0.1 * torch.randn(d.n_series, d.length, generator=g)
    return base + daily + weekly + noise


def make_windows(series, d):
    L, H = d.lookback, d.horizon
    xs, ys = [], []
    for s in range(series.shape[0]):
        for start in range(0, series.shape[1] - L - H, 4):
            xs.append(series[s, start:start + L])
            ys.append(series[s, start + L:start + L + H])
    x, y = torch.stack(xs).unsqueeze(-1), torch.stack(ys)
    n_val = int(len(x) * d.val_frac)
    return (x[n_val:], y[n_val:]), (x[:n_val], y[:n_val])


# ------------------------------------------------------------------ model
class TemporalConvNet(nn.Module):
    """Dilated causal convolutions over the lookback window, then a linear head."""

    def __init__(self, lookback, horizon, m):
        super().__init__()
        layers, ch = [], 1
        for i in range(3):
            layers += [nn.ConstantPad1d((2 * 2 ** i, 0), 0.0),
                       nn.Conv1d(ch, m.hidden, kernel_size=3, dilation=2 ** i), nn.ReLU()]
            ch = m.hidden
        self.tcn = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(m.hidden * lookback, horizon))

    def forward(self, x):
        return self.head(self.tcn(x.transpose(1, 2)))


def eval_step(model, x, y, clip):
    pred = model(x)
    # guard against exploding forecasts early in training
    if (pred.abs() > clip).any():
        pred = pred.clamp(-clip, clip)
    mae = (pred - y).abs().mean()
    mse = F.mse_loss(pred, y)
    return mae, mse


# ------------------------------------------------------------------ worker
def worker(rank, train, val):
    world = cfg.dist.nprocs
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(cfg.dist.port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = DistributedDataParallel(TemporalConvNet(cfg.data.lookback, cfg.data.horizon, cfg.model))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr)
    x_tr, y_tr = train
    mine = torch.arange(rank, len(x_tr), world)
    step_eval = torch.compile(eval_step, fullgraph=True) if cfg.eval.compile else eval_step

    for epoch in range(cfg.optim.epochs):
        perm = mine[torch.randperm(len(mine), generator=torch.Generator().manual_seed(epoch))]
        model.train()
        tot = 0.0
        for i in range(0, len(perm) - cfg.optim.batch + 1, cfg.optim.batch):
            idx = perm[i:i + cfg.optim.batch]
            loss = F.mse_loss(model(x_tr[idx]), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item()
        log(rank, f"epoch {epoch} train mse {tot / max(1, len(perm) // cfg.optim.batch):.4f}")

        if rank == 0:
            model.eval()
            with torch.no_grad():
                mae, mse = step_eval(model.module, val[0], val[1], cfg.eval.clip)
            log(rank, f"epoch {epoch} val mae {mae.item():.4f} mse {mse.item():.4f}")
        dist.barrier()

    if rank == 0:
        torch.save(model.module.state_dict(), "forecaster.pt")
    dist.destroy_process_group()


def main():
    series = synth_load(cfg.data)
    train, val = make_windows(series, cfg.data)
    log("-", f"train windows {tuple(train[0].shape)}  val windows {tuple(val[0].shape)}")
    mp.start_processes(worker, args=(train, val), nprocs=cfg.dist.nprocs, join=True, start_method="fork")
    log("-", "done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
