"""Quantization-aware training (LSQ, Esser et al. 2019) of a small 1-D conv net
for gesture classification from 3-axis accelerometer windows.

Functional style: frozen dataclass configs, factories built with
functools.partial, no trainer class.  The float model is trained first, then
fake-quantizers are switched on for weights and activations.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class DataCfg:
    n_train: int = 1536
    n_val: int = 256
    length: int = 96
    channels: int = 3
    n_classes: int = 6
    noise: float = 0.9
    seed: int = 7


@dataclass(frozen=True)
class ModelCfg:
    widths: tuple = (16, 32, 32)
    kernel: int = 5
    hidden: int = 64
    dropout: float = 0.1


@dataclass(frozen=True)
class QuantCfg:
    weight_bits: int = 4
    act_bits: int = 4
    start_epoch: int = 2


@dataclass(frozen=True)
class OptimCfg:
    lr: float = 2e-3
    weight_decay: float = 1e-4
    epochs: int = 4
    batch_size: int = 64
    warmup_steps: int = 50


@dataclass(frozen=True)
class Cfg:
    data: DataCfg = field(default_factory=DataCfg)
    model: ModelCfg = field(default_factory=ModelCfg)
    quant: QuantCfg = field(default_factory=QuantCfg)
    optim: OptimCfg = field(default_factory=OptimCfg)


# ----------------------------------------------------------------------------- data
def make_gestures(cfg: DataCfg, n: int, offset: int = 0):
    rng = np.random.default_rng(cfg.seed + offset)
    t = np.linspace(0.0, 1.0, cfg.length, dtype=np.float32)
    ys = rng.integers(0, cfg.n_classes, size=n)
    xs = np.empty((n, cfg.channels, cfg.length), dtype=np.float32)
    for i, y in enumerate(ys):
        freq = 1.5 + y * 0.9 + rng.normal(0, 0.1)
        phase = rng.uniform(0, 2 * math.pi)
        for c in range(cfg.channels):
            amp = 1.0 + 0.3 * ((y + c) % 3)
            xs[i, c] = amp * np.sin(2 * math.pi * freq * t + phase + c * y * 0.4)
        xs[i] += rng.normal(0, cfg.noise, size=(cfg.channels, cfg.length))
    return torch.from_numpy(xs), torch.from_numpy(ys).long()


def iterate(x, y, batch_size, shuffle, gen=None):
    idx = torch.randperm(len(x), generator=gen) if shuffle else torch.arange(len(x))
    for s in range(0, len(x), batch_size):
        j = idx[s:s + batch_size]
        yield x[j], y[j]


# ----------------------------------------------------------------------------- LSQ
class LSQ(torch.autograd.Function):
    """Learned step size quantizer: round(clamp(x / s, lo, hi)) * s."""

    @staticmethod
    def forward(ctx, x, scale, lo, hi):
        q = torch.clamp(x / scale, lo, hi)
        ctx.save_for_backward(x, scale)
        ctx.lo, ctx.hi = lo, hi
        return torch.round(q) * scale

    @staticmethod
    def backward(ctx, grad_out):
        x, scale = ctx.saved_tensors
        lo, hi = ctx.lo, ctx.hi
        # work on a (rows, channels) view so the per-tensor gradient scale g
        # from the paper can be computed from the row count
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        q = (x / scale).reshape_as(g2)
        inside = (q >= lo) & (q <= hi)
        grad_x = g2 * inside
        step_grad = torch.where(inside, torch.round(q) - q, torch.clamp(q, lo, hi))
        gscale = 1.0 / math.sqrt(g2.numel() * hi)
        grad_scale = (g2 * step_grad).sum().reshape(scale.shape) * gscale
        return grad_x, grad_scale, None, None


class FakeQuant(nn.Module):
    def __init__(self, bits: int, signed: bool):
        super().__init__()
        self.bits, self.signed = bits, signed
        self.lo = -(2 ** (bits - 1)) if signed else 0
        self.hi = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
        self.scale = nn.Parameter(torch.tensor(1.0))
        self.enabled = False
        self.initialized = False

    def forward(self, x):
        if not self.enabled:
            return x
        if not self.initialized:
            with torch.no_grad():
                self.scale.copy_(2 * x.abs().mean() / math.sqrt(self.hi))
            self.initialized = True
        return LSQ.apply(x, self.scale, self.lo, self.hi)


class QConv1d(nn.Conv1d):
    def __init__(self, *a, wq: Callable[[], FakeQuant], **kw):
        super().__init__(*a, **kw)
        self.wq = wq()

    def forward(self, x):
        return F.conv1d(x, self.wq(self.weight), self.bias, self.stride, self.padding)


class QLinear(nn.Linear):
    def __init__(self, *a, wq: Callable[[], FakeQuant], **kw):
        super().__init__(*a, **kw)
        self.wq = wq()

    def forward(self, x):
        return F.linear(x, self.wq(self.weight), self.bias)


def conv_block(cin, cout, k, conv, act_q):
    return nn.Sequential(conv(cin, cout, k, padding=k // 2), nn.BatchNorm1d(cout), nn.ReLU(), act_q(), nn.MaxPool1d(2))


def build_model(cfg: Cfg) -> nn.Module:
    wq = functools.partial(FakeQuant, cfg.quant.weight_bits, True)
    aq = functools.partial(FakeQuant, cfg.quant.act_bits, False)
    conv = functools.partial(QConv1d, wq=wq)
    lin = functools.partial(QLinear, wq=wq)
    block = functools.partial(conv_block, k=cfg.model.kernel, conv=conv, act_q=aq)
    chans = (cfg.data.channels,) + tuple(cfg.model.widths)
    layers: List[nn.Module] = [block(a, b) for a, b in zip(chans[:-1], chans[1:])]
    layers += [nn.AdaptiveAvgPool1d(1), nn.Flatten(), lin(chans[-1], cfg.model.hidden), nn.ReLU(), aq(),
               nn.Dropout(cfg.model.dropout), lin(cfg.model.hidden, cfg.data.n_classes)]
    return nn.Sequential(*layers)


def set_quant(model: nn.Module, on: bool) -> int:
    n = 0
    for m in model.modules():
        if isinstance(m, FakeQuant):
            m.enabled = on
            n += 1
    return n


# ----------------------------------------------------------------------------- train
def warmup_cosine(step, total, warmup):
    if step < warmup:
        return (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1 + math.cos(math.pi * p))


def make_optimizer(cfg: OptimCfg, model):
    quant_params = [p for n, p in model.named_parameters() if n.endswith(".scale")]
    other = [p for n, p in model.named_parameters() if not n.endswith(".scale")]
    return torch.optim.AdamW([
        {"params": other, "weight_decay": cfg.weight_decay},
        {"params": quant_params, "weight_decay": 0.0, "lr": cfg.lr * 0.1},
    ], lr=cfg.lr)


def evaluate(model, x, y, batch_size) -> Dict[str, float]:
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for xb, yb in iterate(x, y, batch_size, False):
            out = model(xb)
            loss += F.cross_entropy(out, yb, reduction="sum").item()
            correct += (out.argmax(1) == yb).sum().item()
    return {"loss": loss / len(x), "acc": correct / len(x)}


def train(cfg: Cfg):
    torch.manual_seed(0)
    xtr, ytr = make_gestures(cfg.data, cfg.data.n_train)
    xva, yva = make_gestures(cfg.data, cfg.data.n_val, offset=1)
    mean, std = xtr.mean((0, 2), keepdim=True), xtr.std((0, 2), keepdim=True)
    xtr, xva = (xtr - mean) / std, (xva - mean) / std
    model = build_model(cfg)
    opt = make_optimizer(cfg.optim, model)
    steps_per_epoch = math.ceil(len(xtr) / cfg.optim.batch_size)
    total = steps_per_epoch * cfg.optim.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, functools.partial(warmup_cosine, total=total, warmup=cfg.optim.warmup_steps))
    gen = torch.Generator().manual_seed(cfg.data.seed)
    history = []
    for epoch in range(cfg.optim.epochs):
        if epoch == cfg.quant.start_epoch:
            n = set_quant(model, True)
            print(f"epoch {epoch}: enabling {n} fake quantizers "
                  f"(w{cfg.quant.weight_bits}a{cfg.quant.act_bits})")
        model.train()
        t0, run = time.time(), 0.0
        for step, (xb, yb) in enumerate(iterate(xtr, ytr, cfg.optim.batch_size, True, gen)):
            loss = F.cross_entropy(model(xb), yb, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
            opt.step()
            sched.step()
            run = 0.9 * run + 0.1 * loss.item() if step else loss.item()
        metrics = evaluate(model, xva, yva, 256)
        history.append({"epoch": epoch, "train_loss": run, **metrics, "sec": time.time() - t0})
        print("epoch {epoch} train_loss {train_loss:.4f} val_loss {loss:.4f} val_acc {acc:.3f} ({sec:.1f}s)".format(**history[-1]))
    return model, history


if __name__ == "__main__":
    cfg = Cfg()
    print(dataclasses.asdict(cfg))
    model, hist = train(cfg)
    best = max(hist, key=lambda h: h["acc"])
    print(f"best val_acc {best['acc']:.3f} at epoch {best['epoch']}")
