#!/usr/bin/env python3
"""Keyword spotting on MFCC-like features, DDP with torchrun.

    torchrun --standalone --nproc_per_node=4 train_kws.py --epochs 2

Validation is speaker-disjoint: the held-out speakers are split across the ranks
(each rank scores the utterances of its own speakers) and the per-rank accuracies
are averaged with all_reduce.
"""
import argparse
import logging
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

log = logging.getLogger("kws")

KEYWORDS = ["yes", "no", "up", "down", "left", "right", "stop", "go"]
N_MFCC, N_FRAMES = 13, 32


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--n-speakers", type=int, default=15)
    p.add_argument("--val-speakers", type=int, default=3)
    p.add_argument("--utt-per-speaker", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


class SyntheticCommands(Dataset):
    """Utterances of `speakers`: a keyword is a fixed spectro-temporal template, each
    speaker adds a pitch-like offset and noise."""

    def __init__(self, speakers, utt_per_speaker, seed):
        g = torch.Generator().manual_seed(seed)
        templates = torch.randn(len(KEYWORDS), N_MFCC, N_FRAMES, generator=g)
        feats, labels, spk = [], [], []
        for s in speakers:
            gs = torch.Generator().manual_seed(seed * 1000 + s)
            offset = 0.5 * torch.randn(N_MFCC, 1, generator=gs)
            for _ in range(utt_per_speaker):
                k = int(torch.randint(len(KEYWORDS), (1,), generator=gs))
                shift = int(torch.randint(-3, 4, (1,), generator=gs))
                x = torch.roll(templates[k], shift, dims=1) + offset + 0.8 * torch.randn(N_MFCC, N_FRAMES, generator=gs)
                feats.append(x)
                labels.append(k)
                spk.append(s)
        self.x = torch.stack(feats) if feats else torch.empty(0, N_MFCC, N_FRAMES)
        self.y = torch.tensor(labels, dtype=torch.long)
        self.spk = spk

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class DSCNN(nn.Module):
    """Depthwise-separable CNN (Hello Edge), shrunk."""

    def __init__(self, n_classes, ch=32):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, ch, (5, 3), padding=(2, 1)), nn.BatchNorm2d(ch), nn.ReLU())
        blocks = []
        for _ in range(2):
            blocks += [nn.Conv2d(ch, ch, 3, padding=1, groups=ch), nn.BatchNorm2d(ch), nn.ReLU(),
                       nn.Conv2d(ch, ch, 1), nn.BatchNorm2d(ch), nn.ReLU()]
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(ch, n_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x.unsqueeze(1)))
        return self.fc(x.mean(dim=(2, 3)))


def setup():
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s [rank{rank}] %(message)s")
    torch.set_num_threads(1)
    return rank, world


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            pred = model(x).argmax(dim=1)
            correct += int((pred == y).sum())
            total += len(y)
    model.train()
    return correct / total


@record
def main():
    args = parse_args()
    rank, world = setup()
    torch.manual_seed(args.seed)

    speakers = list(range(args.n_speakers))
    train_spk, val_spk = speakers[:-args.val_speakers], speakers[-args.val_speakers:]
    train_ds = SyntheticCommands(train_spk, args.utt_per_speaker, args.seed)
    # each rank validates its own speakers
    my_val_spk = val_spk[rank::world]
    val_ds = SyntheticCommands(my_val_spk, args.utt_per_speaker, args.seed)
    log.info("train %d utterances, validating speakers %s (%d utterances)", len(train_ds), my_val_spk, len(val_ds))

    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=64)

    model = DDP(DSCNN(len(KEYWORDS)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0 = time.time()
        for step, (x, y) in enumerate(train_dl):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0 and rank == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        acc = torch.tensor([evaluate(model.module, val_dl)])
        dist.all_reduce(acc)
        acc /= world
        if rank == 0:
            log.info("epoch %d: speaker-disjoint val acc %.3f (%.1fs)", epoch, acc.item(), time.time() - t0)

    if rank == 0:
        torch.save(model.module.state_dict(), "kws_dscnn.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
