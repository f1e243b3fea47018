"""Streaming next-token LM over a synthetic corpus, generator pipeline style.

    python stream_lm.py --block 64 --batch 16 --max-steps 300

Documents are produced lazily; a pipeline of generators tokenizes, filters, packs them
into fixed-size blocks and shuffles with a buffer, the way webdataset-like loaders do.
"""
import argparse
import itertools
import logging
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

log = logging.getLogger("stream_lm")

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
STOI = {c: i + 1 for i, c in enumerate(ALPHABET)}   # 0 is reserved for <eos>
VOCAB = len(STOI) + 1
EOS = 0


# ---------------------------------------------------------------- pipeline stages

def generate_documents(seed):
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "and", "then",
             "slept", "under", "tree", "big", "small", "red", "blue", "quickly"]
    while True:
        n_sent = rng.randint(1, 6)
        sents = []
        for _ in range(n_sent):
            sents.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + ".")
        yield " ".join(sents)


def tokenize(docs):
    for doc in docs:
        yield [STOI[c] for c in doc if c in STOI] + [EOS]


def drop_short(token_lists, min_len):
    for toks in token_lists:
        if len(toks) >= min_len:
            yield toks


def chunk(token_lists, block):
    """Overlapping windows of block+1 tokens (inputs + shifted targets), stride block//2."""
    stride = block // 2
    for toks in token_lists:
        for start in range(0, max(len(toks) - block, 1), stride):
            yield toks[start:start + block + 1]


def shuffle_buffer(items, size, seed):
    rng = random.Random(seed)
    buf = []
    for it in items:
        buf.append(it)
        if len(buf) >= size:
            yield buf.pop(rng.randrange(len(buf)))
    rng.shuffle(buf)
    yield from buf


def to_tensors(windows):
    for w in windows:
        t = torch.tensor(w, dtype=torch.long)
        yield {"input": t[:-1], "target": t[1:]}


class StreamingText(IterableDataset):
    def __init__(self, seed, block, min_len, shuffle_size, limit=None):
        self.seed, self.block, self.min_len = seed, block, min_len
        self.shuffle_size, self.limit = shuffle_size, limit

    def __iter__(self):
        info = get_worker_info()
        seed = self.seed + (info.id if info else 0)
        stream = generate_documents(seed)
        stream = tokenize(stream)
        stream = drop_short(stream, self.min_len)
        stream = chunk(stream, self.block)
        stream = shuffle_buffer(stream, self.shuffle_size, seed)
        stream = to_tensors(stream)
        if self.limit is not None:
            stream = itertools.islice(stream, self.limit)
        return stream


# ---------------------------------------------------------------- model

class GRULM(nn.Module):
    def __init__(self, vocab, emb, hidden, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def perplexity(model, loader, max_batches):
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for batch in itertools.islice(loader, max_batches):
            logits = model(batch["input"])
            tot += F.cross_entropy(logits.reshape(-1, VOCAB), batch["target"].reshape(-1), reduction="sum").item()
            n += batch["target"].numel()
    model.train()
    return float(torch.exp(torch.tensor(tot / max(n, 1))))


class Meter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.loss, self.tokens, self.t0 = 0.0, 0, time.time()

    def update(self, loss, tokens):
        self.loss += loss * tokens
        self.tokens += tokens

    def summary(self):
        dt = time.time() - self.t0
        return self.loss / max(self.tokens, 1), self.tokens / max(dt, 1e-9)


def get_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--min-len", type=int, default=48)
    ap.add_argument("--shuffle-size", type=int, default=256)
    ap.add_argument("--emb", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt", default="stream_lm.pt")
    return ap.parse_args()


def main():
    args = get_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.manual_seed(args.seed)
    train_ds = StreamingText(args.seed, args.block, args.min_len, args.shuffle_size)
    val_ds = StreamingText(args.seed + 1000, args.block, args.min_len, 0, limit=64)
    train_loader = DataLoader(train_ds, batch_size=args.batch, num_workers=0)
    val_loader = DataLoader(val_ds, batch_size=args.batch, num_workers=0)
    model = GRULM(VOCAB, args.emb, args.hidden, args.layers)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.max_steps)
    meter = Meter()
    log.info("vocab %d, params %d", VOCAB, sum(p.numel() for p in model.parameters()))
    for step, batch in enumerate(train_loader, start=1):
        logits = model(batch["input"])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch["target"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        meter.update(loss.item(), batch["target"].numel())
        if step % args.log_every == 0:
            l, tps = meter.summary()
            log.info("step %d loss %.3f  %.0f tok/s  lr %.2e", step, l, tps, sched.get_last_lr()[0])
            meter.reset()
        if step >= args.max_steps:
            break
    ppl = perplexity(model, val_loader, max_batches=4)
    log.info("val perplexity %.2f", ppl)
    torch.save({"model": model.state_dict(), "args": vars(args)}, args.ckpt)


if __name__ == "__main__":
    main()
