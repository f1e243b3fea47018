"""Tiny model zoo: every architecture registers itself and the smoke test
builds each one, compiles it and runs a forward/backward on a fake batch.

    python model_zoo.py            # smoke-test every registered model
"""
import random
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_REGISTRY = {}


def register(name):
    def deco(builder):
        if name in MODEL_REGISTRY:
            raise KeyError(f"duplicate model name {name!r}")
        MODEL_REGISTRY[name] = builder
        return builder
    return deco


@dataclass
class ZooConfig:
    in_ch: int = 3
    num_classes: int = 10
    width: int = 32
    depth: int = 2
    img: int = 32
    drop: float = 0.1
    extra: dict = field(default_factory=dict)


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class Residual(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.a = conv_bn(ch, ch)
        self.b = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch))

    def forward(self, x):
        return F.relu(x + self.b(self.a(x)))


class MixStyle(nn.Module):
    """Zhou et al. 2021: mixes instance-level feature statistics across the batch."""

    def __init__(self, p=0.5, alpha=0.1, eps=1e-6):
        super().__init__()
        self.p = p
        self.beta = torch.distributions.Beta(alpha, alpha)
        self.eps = eps

    def forward(self, x):
        if not self.training:
            return x
        if random.random() > self.p:
            return x
        B = x.size(0)
        mu = x.mean(dim=[2, 3], keepdim=True)
        var = x.var(dim=[2, 3], keepdim=True)
        sig = (var + self.eps).sqrt()
        mu, sig = mu.detach(), sig.detach()
        x_normed = (x - mu) / sig
        lmda = self.beta.sample((B, 1, 1, 1)).to(x.device)
        perm = torch.randperm(B, device=x.device)
        mu2, sig2 = mu[perm], sig[perm]
        mu_mix = mu * lmda + mu2 * (1 - lmda)
        sig_mix = sig * lmda + sig2 * (1 - lmda)
        return x_normed * sig_mix + mu_mix


class SimpleCNN(nn.Module):
    def __init__(self, cfg: ZooConfig):
        super().__init__()
        w = cfg.width
        self.stem = conv_bn(cfg.in_ch, w)
        self.body = nn.Sequential(*[conv_bn(w, w) for _ in range(cfg.depth)])
        self.head = nn.Linear(w, cfg.num_classes)

    def forward(self, x):
        x = self.body(self.stem(x))
        return self.head(x.mean(dim=[2, 3]))


class ResNetMini(nn.Module):
    def __init__(self, cfg: ZooConfig, mixstyle=False):
        super().__init__()
        w = cfg.width
        self.stem = conv_bn(cfg.in_ch, w, stride=1)
        layers = []
        for i in range(cfg.depth):
            layers.append(Residual(w))
            if mixstyle and i == 0:
                layers.append(MixStyle(**cfg.extra.get("mixstyle", {})))
        self.layers = nn.Sequential(*layers)
        self.drop = nn.Dropout(cfg.drop)
        self.fc = nn.Linear(w, cfg.num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(self.drop(x))


class PatchMLP(nn.Module):
    def __init__(self, cfg: ZooConfig, patch=4):
        super().__init__()
        n = (cfg.img // patch) ** 2
        self.patch = patch
        self.embed = nn.Linear(cfg.in_ch * patch * patch, cfg.width)
        self.mix = nn.Sequential(nn.LayerNorm(cfg.width), nn.Linear(cfg.width, cfg.width), nn.GELU())
        self.tokens = nn.Linear(n, n)
        self.fc = nn.Linear(cfg.width, cfg.num_classes)

    def forward(self, x):
        p = self.patch
        x = F.unfold(x, kernel_size=p, stride=p).transpose(1, 2)
        x = self.embed(x)
        x = x + self.tokens(x.transpose(1, 2)).transpose(1, 2)
        x = x + self.mix(x)
        return self.fc(x.mean(1))


@register("simple_cnn")
def build_simple_cnn(cfg):
    return SimpleCNN(cfg)


@register("resnet_mini")
def build_resnet_mini(cfg):
    return ResNetMini(cfg)


@register("patch_mlp")
def build_patch_mlp(cfg):
    return PatchMLP(cfg)


@register("resnet_mini_mixstyle")
def build_resnet_mixstyle(cfg):
    cfg.extra.setdefault("mixstyle", {"p": 0.5, "alpha": 0.1})
    return ResNetMini(cfg, mixstyle=True)


def create_model(name, **overrides):
    cfg = ZooConfig(**overrides)
    return MODEL_REGISTRY[name](cfg), cfg


def smoke_test(name, batch=8, compile=True):
    torch.manual_seed(0)
    random.seed(0)
    model, cfg = create_model(name)
    model.train()
    if compile:
        model = torch.compile(model, fullgraph=True)
    x = torch.randn(batch, cfg.in_ch, cfg.img, cfg.img)
    y = torch.randint(0, cfg.num_classes, (batch,))
    logits = model(x)
    assert logits.shape == (batch, cfg.num_classes), logits.shape
    loss = F.cross_entropy(logits, y)
    loss.backward()
    n_params = sum(p.numel() for p in model.parameters())
    return loss.item(), n_params


if __name__ == "__main__":
    for name in sorted(MODEL_REGISTRY):
        loss, n = smoke_test(name)
        print(f"{name:24s} params={n:8d} loss={loss:.4f}  OK")
    print(f"all {len(MODEL_REGISTRY)} models passed")
