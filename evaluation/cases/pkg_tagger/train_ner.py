"""Train / run the toy NER tagger.

    python train_ner.py train --epochs 5 --batch-size 32 --ckpt checkpoints/ner.pt
    python train_ner.py predict --ckpt checkpoints/ner.pt "anna smith visited paris"
"""
import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict

import numpy as np
import torch

from tagger import TaggerConfig, TaggingDataset, TransformerTagger, Vocab, make_loader, span_f1, synthetic_corpus
from tagger.data import TAGS, collate


def get_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    t = sub.add_parser("train")
    t.add_argument("--n-train", type=int, default=1200)
    t.add_argument("--n-dev", type=int, default=200)
    t.add_argument("--epochs", type=int, default=5)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--patience", type=int, default=2)
    t.add_argument("--seed", type=int, default=13)
    t.add_argument("--ckpt", default="checkpoints/ner.pt")
    t.add_argument("--resume", action="store_true")
    t.add_argument("--metrics-out", default="checkpoints/metrics.jsonl")
    pr = sub.add_parser("predict")
    pr.add_argument("--ckpt", default="checkpoints/ner.pt")
    pr.add_argument("sentences", nargs="+")
    args = p.parse_args(argv)
    if args.cmd is None:  # default to training with default options
        args = p.parse_args(["train"] + (argv if argv is not None else sys.argv[1:]))
    return args


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    gold, pred = [], []
    for tokens, mask, tags in loader:
        out = model(tokens, mask).argmax(-1)
        for i in range(tokens.size(0)):
            n = int((~mask[i]).sum())
            gold.append([TAGS[t] for t in tags[i, :n].tolist()])
            pred.append([TAGS[t] for t in out[i, :n].tolist()])
    model.train()
    per_type = defaultdict(list)
    for g, p in zip(gold, pred):
        for ent in ("PER", "LOC", "ORG"):
            keep = lambda seq: [t if t.endswith(ent) else "O" for t in seq]
            per_type[ent].append((keep(g), keep(p)))
    report = {ent: span_f1(*zip(*pairs)) for ent, pairs in per_type.items()}
    return span_f1(gold, pred), report


def save_checkpoint(path, model, opt, epoch, cfg, vocab, best):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch,
                "cfg": cfg.__dict__, "vocab": vocab.itos, "best": best}, path)


def train(args):
    seed_all(args.seed)
    train_sents = synthetic_corpus(args.n_train, seed=args.seed)
    dev_sents = synthetic_corpus(args.n_dev, seed=args.seed + 1)
    vocab = Vocab(train_sents)
    print(f"vocab size {len(vocab)}, {len(train_sents)} train / {len(dev_sents)} dev sentences")

    train_dl = make_loader(TaggingDataset(train_sents, vocab), args.batch_size, shuffle=True, seed=args.seed)
    dev_dl = make_loader(TaggingDataset(dev_sents, vocab), 64, shuffle=False)

    cfg = TaggerConfig(vocab_size=len(vocab), num_tags=len(TAGS))
    model = TransformerTagger(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    start_epoch, best = 1, -1.0
    if args.resume and os.path.exists(args.ckpt):
        state = torch.load(args.ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start_epoch, best = state["epoch"] + 1, state["best"]
        print(f"resumed from epoch {state['epoch']} (best F1 {best:.3f})")
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters")

    bad_epochs = 0
    os.makedirs(os.path.dirname(args.metrics_out) or ".", exist_ok=True)
    with open(args.metrics_out, "a") as mlog:
        for epoch in range(start_epoch, args.epochs + 1):
            t0, tot, nb = time.time(), 0.0, 0
            for tokens, mask, tags in train_dl:
                loss = model.loss(tokens, mask, tags)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                tot += loss.item()
                nb += 1
            f1, report = evaluate(model, dev_dl)
            print(f"epoch {epoch} loss {tot / nb:.4f} dev F1 {f1:.3f} "
                  + " ".join(f"{k}={v:.2f}" for k, v in report.items()) + f" ({time.time() - t0:.1f}s)")
            mlog.write(json.dumps({"epoch": epoch, "loss": tot / nb, "f1": f1, **report}) + "\n")
            if f1 > best:
                best, bad_epochs = f1, 0
                save_checkpoint(args.ckpt, model, opt, epoch, cfg, vocab, best)
            else:
                bad_epochs += 1
                if bad_epochs >= args.patience:
                    print("early stopping")
                    break
    print(f"best dev F1 {best:.3f}")


@torch.no_grad()
def predict(args):
    state = torch.load(args.ckpt)
    cfg = TaggerConfig(**state["cfg"])
    model = TransformerTagger(cfg)
    model.load_state_dict(state["model"])
    model.eval()
    stoi = {w: i for i, w in enumerate(state["vocab"])}
    batch = [([stoi.get(w, 1) for w in s.lower().split()], [0] * len(s.split())) for s in args.sentences]
    tokens, mask, _ = collate(batch)
    out = model(tokens, mask).argmax(-1)
    for s, row in zip(args.sentences, out):
        words = s.split()
        print(" ".join(f"{w}/{TAGS[t]}" for w, t in zip(words, row.tolist())))


def main():
    args = get_args()
    {"train": train, "predict": predict}[args.cmd](args)


if __name__ == "__main__":
    main()
