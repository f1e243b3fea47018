#!/usr/bin/env python3
"""
Keyword spotting with a bidirectional GRU over variable-length filterbank frames.

Features are synthesised (each keyword = a sequence of formant-like "phones" with
random durations), so utterances have different lengths; batches are bucketed by
length and packed with pack_padded_sequence.
"""
from __future__ import print_function

import argparse
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset, Sampler

KEYWORDS = ['yes', 'no', 'up', 'down', 'left', 'right', 'on', 'off', 'stop', 'go']
N_MELS = 40


def phone_template(rng, n_mels):
    centers = rng.uniform(3, n_mels - 3, size=3)
    widths = rng.uniform(1.5, 4.0, size=3)
    bins = np.arange(n_mels)
    return sum(np.exp(-(bins - c) ** 2 / (2 * w ** 2)) for c, w in zip(centers, widths))


class SyntheticKWS(Dataset):
    def __init__(self, n_per_class, seed, n_mels=N_MELS, split='train'):
        rng = np.random.RandomState(seed)
        proto_rng = np.random.RandomState(1234)  # the same keyword "pronunciations" for every split
        self.protos = [[phone_template(proto_rng, n_mels) for _ in range(len(w) + 1)] for w in KEYWORDS]
        self.items = []
        for label, phones in enumerate(self.protos):
            for _ in range(n_per_class):
                frames = []
                for ph in phones:
                    dur = rng.randint(4, 15)
                    seg = np.tile(ph, (dur, 1)) * rng.uniform(0.7, 1.3)
                    frames.append(seg)
                x = np.concatenate(frames, 0)
                x += rng.normal(0, 0.15, x.shape)
                x = np.log1p(np.clip(x, 0, None))
                self.items.append((x.astype(np.float32), label))
        self.split = split

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        x, y = self.items[idx]
        return torch.from_numpy(x), y


class BucketBatchSampler(Sampler):
    """Group utterances of similar length; shuffle buckets and the order inside them."""

    def __init__(self, lengths, batch_size, n_buckets=8, seed=0):
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        order = np.argsort(self.lengths)
        self.buckets = [list(b) for b in np.array_split(order, n_buckets)]

    def __iter__(self):
        batches = []
        for b in self.buckets:
            b = b[:]
            self.rng.shuffle(b)
            batches += [b[i:i + self.batch_size] for i in range(0, len(b), self.batch_size)]
        self.rng.shuffle(batches)
        return iter(batches)

    def __len__(self):
        return sum(math.ceil(len(b) / self.batch_size) for b in self.buckets)


def pad_collate(batch):
    feats, labels = zip(*batch)
    lengths = torch.tensor([f.shape[0] for f in feats])
    # pack_padded_sequence wants the longest first
    order = sorted(range(len(feats)), key=lambda i: feats[i].shape[0], reverse=True)
    feats = [feats[i] for i in order]
    labels = torch.tensor([labels[i] for i in order])
    return pad_sequence(feats, batch_first=True), lengths, labels


class KWSNet(nn.Module):
    def __init__(self, n_mels=N_MELS, hidden=64, n_classes=len(KEYWORDS), dropout=0.2):
        super(KWSNet, self).__init__()
        self.inp = nn.Sequential(nn.Linear(n_mels, hidden), nn.ReLU(), nn.Dropout(dropout))
        self.gru = nn.GRU(hidden, hidden, num_layers=2, batch_first=True, bidirectional=True, dropout=dropout)
        self.att = nn.Linear(2 * hidden, 1)
        self.out = nn.Linear(2 * hidden, n_classes)

    def forward(self, x, lengths):
        h = self.inp(x)
        packed = pack_padded_sequence(h, lengths, batch_first=True)
        out, _ = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        # attention pooling over valid frames
        scores = self.att(out).squeeze(-1)
        valid = torch.arange(out.size(1))[None, :] < lengths[:, None]
        scores = scores.masked_fill(~valid, -1e9)
        w = F.softmax(scores, dim=1).unsqueeze(-1)
        return self.out((w * out).sum(1))


def accuracy(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, lengths, y in loader:
            correct += (model(x, lengths).argmax(1) == y).sum().item()
            total += y.size(0)
    model.train()
    return 100.0 * correct / total


def main():
    parser = argparse.ArgumentParser(description='GRU keyword spotter')
    parser.add_argument('--per-class', type=int, default=60)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--epochs', type=int, default=6)
    parser.add_argument('--lr', type=float, default=0.003)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--log-interval', type=int, default=5)
    parser.add_argument('--save-model', action='store_true', default=True)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)

    train_set = SyntheticKWS(args.per_class, seed=args.seed)
    test_set = SyntheticKWS(args.per_class // 4, seed=args.seed + 1, split='test')
    lens = [x.shape[0] for x, _ in train_set.items]
    print('train utterances: %d (frames %d..%d), test: %d' % (len(train_set), min(lens), max(lens), len(test_set)))

    train_loader = DataLoader(train_set, batch_sampler=BucketBatchSampler(lens, args.batch_size, seed=args.seed),
                              collate_fn=pad_collate)
    test_loader = DataLoader(test_set, batch_size=64, shuffle=False, collate_fn=pad_collate)

    model = KWSNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)

    for epoch in range(1, args.epochs + 1):
        start = time.time()
        for batch_idx, (data, lengths, target) in enumerate(train_loader):
            optimizer.zero_grad()
            output = model(data, lengths)
            loss = F.cross_entropy(output, target)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * args.batch_size, len(train_set),
                    100. * batch_idx / len(train_loader), loss.item()))
        scheduler.step()
        print('Epoch {} done in {:.1f}s, test accuracy {:.1f}%'.format(epoch, time.time() - start,
                                                                        accuracy(model, test_loader)))

    if args.save_model:
        torch.save(model.state_dict(), 'kws_gru.pt')


if __name__ == '__main__':
    main()
