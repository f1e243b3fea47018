#!/usr/bin/env python
"""Two-stage text classifier for support tickets.

Stage 1 (``pretrain``): train a bag-of-embeddings language-ish model on the
generic ticket corpus (predict the ticket's product line).
Stage 2 (``finetune``): warm-start from the stage-1 checkpoint and fine-tune on
the (smaller) billing-team corpus, which has its own intent labels.

Usage:
    python tokclf.py --stage all
    python tokclf.py --stage finetune --init runs/tokclf/pretrain.pt
"""
import argparse
import collections
import json
import logging
import os
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("tokclf")

PAD, UNK = "<pad>", "<unk>"
SPECIALS = [PAD, UNK]

GENERIC_WORDS = (
    "login password reset account email phone app crash slow screen button "
    "update install error page load sync backup device network wifi cable "
    "printer driver monitor keyboard mouse license key activate trial order "
    "ship delivery return refund invoice payment card charge plan upgrade"
).split()
BILLING_WORDS = (
    "invoice refund charge card payment plan upgrade downgrade vat receipt "
    "prorate chargeback dunning iban sepa wire overdue credit debit coupon"
).split()
PRODUCTS = ["desktop", "mobile", "cloud", "hardware", "store"]
INTENTS = ["refund", "invoice_copy", "change_plan", "failed_payment"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stage", choices=["pretrain", "finetune", "all"], default="all")
    p.add_argument("--workdir", default="runs/tokclf")
    p.add_argument("--init", default=None, help="checkpoint to warm-start stage 2 from")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--min-freq", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pretrain-epochs", type=int, default=4)
    p.add_argument("--finetune-epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--n-generic", type=int, default=6000)
    p.add_argument("--n-billing", type=int, default=1200)
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# --------------------------------------------------------------------------- data
def synth_ticket(rng, words, n_rare, topic_words):
    n = rng.randint(6, 30)
    toks = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            toks.append(rng.choice(topic_words))
        elif r < 0.9:
            toks.append(rng.choice(words))
        else:
            toks.append("tok%d" % rng.randint(0, n_rare))
    return toks


def make_generic_corpus(n, seed):
    rng = random.Random(seed)
    data = []
    for _ in range(n):
        y = rng.randrange(len(PRODUCTS))
        topic = GENERIC_WORDS[y * 8:(y + 1) * 8]
        toks = synth_ticket(rng, GENERIC_WORDS, 400, topic + [PRODUCTS[y]])
        data.append((toks, y))
    return data


def make_billing_corpus(n, seed):
    rng = random.Random(seed + 1)
    data = []
    for _ in range(n):
        y = rng.randrange(len(INTENTS))
        topic = BILLING_WORDS[y * 5:(y + 1) * 5] + [INTENTS[y].split("_")[0]]
        toks = synth_ticket(rng, GENERIC_WORDS + BILLING_WORDS, 120, topic)
        data.append((toks, y))
    return data


class Vocab:
    def __init__(self, itos):
        self.itos = list(itos)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, corpora, min_freq):
        counts = collections.Counter()
        for corpus in corpora:
            for toks, _ in corpus:
                counts.update(toks)
        words = sorted(w for w, c in counts.items() if c >= min_freq)
        return cls(SPECIALS + words)

    def __len__(self):
        return len(self.itos)

    def encode(self, toks):
        unk = self.stoi[UNK]
        return [self.stoi.get(t, unk) for t in toks]

    def to_json(self, path):
        with open(path, "w") as f:
            json.dump(self.itos, f)


def batches(data, vocab, batch_size, shuffle, rng):
    idx = list(range(len(data)))
    if shuffle:
        rng.shuffle(idx)
    for s in range(0, len(idx), batch_size):
        chunk = [data[i] for i in idx[s:s + batch_size]]
        ids = [torch.tensor(vocab.encode(t), dtype=torch.long) for t, _ in chunk]
        offsets = torch.tensor([0] + [len(x) for x in ids[:-1]]).cumsum(0)
        yield torch.cat(ids), offsets, torch.tensor([y for _, y in chunk])


# --------------------------------------------------------------------------- model
class TicketClassifier(nn.Module):
    def __init__(self, vocab_size, dim, hidden, n_classes):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=0)
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.1))
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, ids, offsets):
        return self.head(self.encoder(self.embedding(ids, offsets)))


def run_epoch(model, data, vocab, args, opt=None, rng=None):
    train = opt is not None
    model.train(train)
    tot, correct, loss_sum = 0, 0, 0.0
    with torch.set_grad_enabled(train):
        for ids, offsets, y in batches(data, vocab, args.batch_size, train, rng):
            logits = model(ids, offsets)
            loss = F.cross_entropy(logits, y)
            if train:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            loss_sum += loss.item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            tot += len(y)
    return loss_sum / tot, correct / tot


def split(data, frac, seed):
    rng = random.Random(seed)
    idx = list(range(len(data)))
    rng.shuffle(idx)
    cut = int(len(idx) * frac)
    return [data[i] for i in idx[cut:]], [data[i] for i in idx[:cut]]


def save_checkpoint(path, model, vocab, meta):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "vocab": vocab.itos, "meta": meta}, tmp)
    os.replace(tmp, path)
    log.info("saved %s (%d params)", path, sum(p.numel() for p in model.parameters()))


def stage_pretrain(args):
    t0 = time.time()
    data = make_generic_corpus(args.n_generic, args.seed)
    train, val = split(data, 0.1, args.seed)
    vocab = Vocab.build([train], args.min_freq)
    log.info("pretrain: %d train / %d val tickets, vocab %d", len(train), len(val), len(vocab))
    model = TicketClassifier(len(vocab), args.dim, args.hidden, len(PRODUCTS))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    rng = random.Random(args.seed)
    best = 0.0
    for epoch in range(args.pretrain_epochs):
        tl, ta = run_epoch(model, train, vocab, args, opt, rng)
        vl, va = run_epoch(model, val, vocab, args)
        log.info("pretrain epoch %d train_loss %.4f acc %.3f | val_loss %.4f acc %.3f", epoch, tl, ta, vl, va)
        best = max(best, va)
    path = os.path.join(args.workdir, "pretrain.pt")
    save_checkpoint(path, model, vocab, {"val_acc": best, "seconds": time.time() - t0})
    return path


def stage_finetune(args, init):
    data = make_billing_corpus(args.n_billing, args.seed)
    train, val = split(data, 0.2, args.seed)
    generic = make_generic_corpus(args.n_generic, args.seed)
    # billing has its own jargon (iban, sepa, prorate...): build the vocabulary
    # over both corpora so the new words get their own rows
    vocab = Vocab.build([generic, train], args.min_freq)
    log.info("finetune: %d train / %d val tickets, vocab %d", len(train), len(val), len(vocab))
    model = TicketClassifier(len(vocab), args.dim, args.hidden, len(PRODUCTS))
    if init:
        ckpt = torch.load(init, map_location="cpu")
        log.info("warm start from %s (val_acc %.3f)", init, ckpt["meta"]["val_acc"])
        model.load_state_dict(ckpt["model"])
    model.head = nn.Linear(args.hidden, len(INTENTS))
    opt = torch.optim.AdamW([
        {"params": model.embedding.parameters(), "lr": args.lr * 0.1},
        {"params": model.encoder.parameters(), "lr": args.lr * 0.3},
        {"params": model.head.parameters(), "lr": args.lr},
    ], weight_decay=0.01)
    rng = random.Random(args.seed + 7)
    history = []
    for epoch in range(args.finetune_epochs):
        tl, ta = run_epoch(model, train, vocab, args, opt, rng)
        vl, va = run_epoch(model, val, vocab, args)
        history.append({"epoch": epoch, "train_loss": tl, "val_loss": vl, "val_acc": va})
        log.info("finetune epoch %d train_loss %.4f | val_loss %.4f acc %.3f", epoch, tl, vl, va)
    vocab.to_json(os.path.join(args.workdir, "vocab_finetune.json"))
    save_checkpoint(os.path.join(args.workdir, "finetune.pt"), model, vocab, {"history": history})
    return history


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    seed_everything(args.seed)
    torch.set_num_threads(1)
    init = args.init
    if args.stage in ("pretrain", "all"):
        init = stage_pretrain(args)
    if args.stage in ("finetune", "all"):
        stage_finetune(args, init)


if __name__ == "__main__":
    main()
