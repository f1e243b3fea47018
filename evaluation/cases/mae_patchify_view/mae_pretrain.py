"""Masked-autoencoder pretraining of a tiny ViT on synthetic 'glyph' images.

Config is a plain dict (no hydra); override with --set key=value, dotted keys allowed.
"""
import argparse
import ast
import copy
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {
    "seed": 0,
    "data": {"n_images": 512, "img_size": 32, "channels": 3, "n_glyphs": 4},
    "model": {
        "patch_size": 4,
        "embed_dim": 64,
        "depth": 3,
        "heads": 4,
        "decoder_dim": 48,
        "decoder_depth": 1,
        "mask_ratio": 0.75,
        "norm_pix_loss": True,
    },
    "train": {"epochs": 3, "batch_size": 64, "lr": 1.5e-4, "warmup_epochs": 1, "wd": 0.05},
    "io": {"ckpt_dir": "checkpoints/mae", "log_every": 2},
}


def apply_overrides(cfg, pairs):
    cfg = copy.deepcopy(cfg)
    for pair in pairs:
        key, val = pair.split("=", 1)
        node = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            node = node[p]
        try:
            node[parts[-1]] = ast.literal_eval(val)
        except (ValueError, SyntaxError):
            node[parts[-1]] = val
    return cfg


# ---------------------------------------------------------------- data ----
def glyph_images(n, size, channels, n_glyphs, gen):
    """Coloured crosses / rings / bars / dots on a noisy background."""
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    imgs = torch.rand(n, channels, size, size, generator=gen) * 0.2
    for i in range(n):
        for _ in range(int(torch.randint(1, n_glyphs + 1, (1,), generator=gen))):
            cx, cy = torch.randint(4, size - 4, (2,), generator=gen).tolist()
            kind = int(torch.randint(0, 4, (1,), generator=gen))
            if kind == 0:
                m = ((xx - cx).abs() <= 1) | ((yy - cy).abs() <= 1)
                m &= ((xx - cx).abs() <= 4) & ((yy - cy).abs() <= 4)
            elif kind == 1:
                r = ((xx - cx) ** 2 + (yy - cy) ** 2).float().sqrt()
                m = (r > 2.5) & (r < 4)
            elif kind == 2:
                m = ((yy - cy).abs() <= 1) & ((xx - cx).abs() <= 6)
            else:
                m = ((xx - cx) ** 2 + (yy - cy) ** 2) <= 4
            color = torch.rand(channels, 1, 1, generator=gen)
            imgs[i] = torch.where(m, color.expand_as(imgs[i]), imgs[i])
    return imgs


# --------------------------------------------------------------- model ----
class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyMAE(nn.Module):
    def __init__(self, img_size, channels, patch_size, embed_dim, depth, heads, decoder_dim, decoder_depth,
                 mask_ratio, norm_pix_loss):
        super().__init__()
        self.p = patch_size
        self.n_patches = (img_size // patch_size) ** 2
        self.mask_ratio = mask_ratio
        self.norm_pix_loss = norm_pix_loss
        self.patch_embed = nn.Conv2d(channels, embed_dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos = nn.Parameter(torch.randn(1, self.n_patches + 1, embed_dim) * 0.02)
        self.encoder = nn.Sequential(*[Block(embed_dim, heads) for _ in range(depth)])
        self.enc_norm = nn.LayerNorm(embed_dim)
        self.dec_embed = nn.Linear(embed_dim, decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_dim))
        self.dec_pos = nn.Parameter(torch.randn(1, self.n_patches + 1, decoder_dim) * 0.02)
        self.decoder = nn.Sequential(*[Block(decoder_dim, heads) for _ in range(decoder_depth)])
        self.dec_norm = nn.LayerNorm(decoder_dim)
        self.dec_pred = nn.Linear(decoder_dim, patch_size * patch_size * channels)

    def patchify(self, imgs):
        """(B, C, H, W) -> (B, L, p*p*C)"""
        B, C, H, W = imgs.shape
        p = self.p
        h, w = H // p, W // p
        x = imgs.view(B, C, h, p, w, p)
        x = x.permute(0, 2, 4, 3, 5, 1)
        return x.view(B, h * w, p * p * C)

    def random_masking(self, x):
        B, L, D = x.shape
        keep = int(L * (1 - self.mask_ratio))
        noise = torch.rand(B, L, device=x.device)
        ids_shuffle = noise.argsort(dim=1)
        ids_restore = ids_shuffle.argsort(dim=1)
        ids_keep = ids_shuffle[:, :keep]
        x_kept = torch.gather(x, 1, ids_keep.unsqueeze(-1).expand(-1, -1, D))
        mask = torch.ones(B, L, device=x.device)
        mask[:, :keep] = 0
        return x_kept, torch.gather(mask, 1, ids_restore), ids_restore

    def forward(self, imgs):
        x = self.patch_embed(imgs).flatten(2).transpose(1, 2) + self.pos[:, 1:]
        x, mask, ids_restore = self.random_masking(x)
        cls = (self.cls_token + self.pos[:, :1]).expand(x.shape[0], -1, -1)
        x = self.enc_norm(self.encoder(torch.cat([cls, x], 1)))

        y = self.dec_embed(x)
        B, L = ids_restore.shape
        mask_tokens = self.mask_token.expand(B, L + 1 - y.shape[1], -1)
        y_ = torch.cat([y[:, 1:], mask_tokens], 1)
        y_ = torch.gather(y_, 1, ids_restore.unsqueeze(-1).expand(-1, -1, y.shape[2]))
        y = torch.cat([y[:, :1], y_], 1) + self.dec_pos
        pred = self.dec_pred(self.dec_norm(self.decoder(y)))[:, 1:]

        target = self.patchify(imgs)
        if self.norm_pix_loss:
            mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
            target = (target - mean) / (var + 1e-6).sqrt()
        loss = ((pred - target) ** 2).mean(-1)
        return (loss * mask).sum() / mask.sum(), pred, mask


# ---------------------------------------------------------------- main ----
def lr_at(epoch_f, cfg):
    t = cfg["train"]
    if epoch_f < t["warmup_epochs"]:
        return t["lr"] * epoch_f / t["warmup_epochs"]
    prog = (epoch_f - t["warmup_epochs"]) / max(1e-8, t["epochs"] - t["warmup_epochs"])
    return t["lr"] * 0.5 * (1 + math.cos(math.pi * prog))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--dump-config", action="store_true")
    args = ap.parse_args()
    cfg = apply_overrides(CONFIG, args.set)
    if args.dump_config:
        print(json.dumps(cfg, indent=2))
        return

    torch.manual_seed(cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    d = cfg["data"]
    images = glyph_images(d["n_images"], d["img_size"], d["channels"], d["n_glyphs"], gen)
    print(f"images {tuple(images.shape)} mean {images.mean():.3f}")

    model = TinyMAE(img_size=d["img_size"], channels=d["channels"], **cfg["model"])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["train"]["lr"], betas=(0.9, 0.95),
                            weight_decay=cfg["train"]["wd"])
    bs = cfg["train"]["batch_size"]
    steps_per_epoch = math.ceil(len(images) / bs)
    os.makedirs(cfg["io"]["ckpt_dir"], exist_ok=True)

    for epoch in range(cfg["train"]["epochs"]):
        perm = torch.randperm(len(images), generator=gen)
        t0, total = time.time(), 0.0
        for i in range(steps_per_epoch):
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch + i / steps_per_epoch, cfg)
            batch = images[perm[i * bs:(i + 1) * bs]]
            loss, _, _ = model(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
            if i % cfg["io"]["log_every"] == 0:
                print(f"epoch {epoch} it {i}/{steps_per_epoch} loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}")
        print(f"== epoch {epoch} mean loss {total / steps_per_epoch:.4f} ({time.time() - t0:.1f}s)")
        torch.save({"model": model.state_dict(), "epoch": epoch, "config": cfg},
                   os.path.join(cfg["io"]["ckpt_dir"], f"mae_ep{epoch}.pt"))


if __name__ == "__main__":
    main()
