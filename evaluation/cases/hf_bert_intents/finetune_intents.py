#!/usr/bin/env python
# Intent classifier for the support bot.  Tiny BERT trained from scratch (no hub access
# on the build box), word-level vocab built from the utterances themselves.
#
#   python finetune_intents.py --epochs 4 --lr 5e-4
#
import argparse
import json
import math
import os
import random
import re
import time
from collections import Counter

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from transformers import BertConfig, BertForSequenceClassification
from transformers import get_linear_schedule_with_warmup

# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
TEMPLATES = {
    "check_balance": [
        "what is my {acct} balance",
        "how much money is in my {acct}",
        "show me the balance of my {acct} please",
        "can you tell me my {acct} balance",
    ],
    "transfer_money": [
        "send {amt} dollars to {who}",
        "transfer {amt} from my {acct} to {who}",
        "i want to move {amt} to {who}",
        "please wire {amt} to {who} today",
    ],
    "report_fraud": [
        "there is a charge i did not make on my {acct}",
        "someone used my card without permission",
        "i think my {acct} was hacked",
        "report a suspicious payment of {amt}",
    ],
    "card_lost": [
        "i lost my card",
        "my card was stolen yesterday",
        "block my card i cannot find it",
        "how do i freeze a lost card",
    ],
}
# intent names as they appear in the annotation sheet
INTENTS = ["check_balance", "transfer_money", "report_fraud", "card_lost"]
LABEL2ID = {name: i for i, name in enumerate(INTENTS)}

FILL = {
    "acct": ["checking", "savings", "credit", "joint", "business"],
    "amt": ["20", "50", "100", "250", "1000", "ten", "fifty"],
    "who": ["mom", "john", "my landlord", "alice", "the plumber", "my savings"],
}


def make_utterances(n_per_intent, seed):
    rng = random.Random(seed)
    out = []
    for intent, temps in TEMPLATES.items():
        for _ in range(n_per_intent):
            t = rng.choice(temps)
            text = re.sub(r"\{(\w+)\}", lambda m: rng.choice(FILL[m.group(1)]), t)
            if rng.random() < 0.3:
                text = rng.choice(["hi ", "hello ", "hey there ", ""]) + text
            out.append((text, intent))
    rng.shuffle(out)
    return out


class WordTokenizer:
    PAD, UNK, CLS, SEP = "[PAD]", "[UNK]", "[CLS]", "[SEP]"

    def __init__(self, texts, min_freq=1):
        counts = Counter(w for t in texts for w in self.split(t))
        self.itos = [self.PAD, self.UNK, self.CLS, self.SEP]
        self.itos += sorted(w for w, c in counts.items() if c >= min_freq)
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @staticmethod
    def split(text):
        return re.findall(r"[a-z0-9]+", text.lower())

    def __len__(self):
        return len(self.itos)

    def encode(self, text, max_len):
        ids = [self.stoi[self.CLS]]
        ids += [self.stoi.get(w, self.stoi[self.UNK]) for w in self.split(text)][: max_len - 2]
        ids.append(self.stoi[self.SEP])
        attn = [1] * len(ids)
        pad = max_len - len(ids)
        return ids + [0] * pad, attn + [0] * pad


class IntentDataset(Dataset):
    def __init__(self, pairs, tok, max_len=24):
        self.items = []
        for text, intent in pairs:
            ids, attn = tok.encode(text, max_len)
            self.items.append((ids, attn, LABEL2ID[intent]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        ids, attn, label = self.items[i]
        return {
            "input_ids": torch.tensor(ids),
            "attention_mask": torch.tensor(attn),
            "labels": torch.tensor(label),
        }


# ---------------------------------------------------------------------------
# train / eval
# ---------------------------------------------------------------------------
def evaluate(model, loader):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for batch in loader:
            out = model(**batch)
            loss_sum += out.loss.item() * batch["labels"].size(0)
            correct += (out.logits.argmax(-1) == batch["labels"]).sum().item()
            total += batch["labels"].size(0)
    model.train()
    return loss_sum / total, correct / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--max_len", type=int, default=24)
    ap.add_argument("--n_per_intent", type=int, default=120)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--output_dir", default="outputs/intent-bert")
    args = ap.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    pairs = make_utterances(args.n_per_intent, args.seed)
    split = int(0.85 * len(pairs))
    train_pairs, dev_pairs = pairs[:split], pairs[split:]
    tok = WordTokenizer([t for t, _ in train_pairs])
    print(f"vocab={len(tok)} train={len(train_pairs)} dev={len(dev_pairs)}")

    train_ds = IntentDataset(train_pairs, tok, args.max_len)
    dev_ds = IntentDataset(dev_pairs, tok, args.max_len)
    g = torch.Generator().manual_seed(args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, generator=g)
    dev_dl = DataLoader(dev_ds, batch_size=64)

    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        num_labels=3,
        problem_type="single_label_classification",
    )
    config.id2label = {i: n for i, n in enumerate(INTENTS[: config.num_labels])}
    config.label2id = {n: i for i, n in config.id2label.items()}
    model = BertForSequenceClassification(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model params: {n_params / 1e6:.2f}M")

    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total_steps = args.epochs * math.ceil(len(train_ds) / args.batch_size)
    sched = get_linear_schedule_with_warmup(optim, int(args.warmup * total_steps), total_steps)

    os.makedirs(args.output_dir, exist_ok=True)
    history = []
    step = 0
    best_acc = -1.0
    t0 = time.time()
    for epoch in range(args.epochs):
        running = 0.0
        for batch in train_dl:
            out = model(**batch)
            loss = out.loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            optim.zero_grad(set_to_none=True)
            running += loss.item()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {running / 10:.4f} lr {sched.get_last_lr()[0]:.2e}")
                running = 0.0
        dev_loss, dev_acc = evaluate(model, dev_dl)
        history.append({"epoch": epoch, "dev_loss": dev_loss, "dev_acc": dev_acc, "elapsed": time.time() - t0})
        print(f"== epoch {epoch}: dev_loss={dev_loss:.4f} dev_acc={dev_acc:.3f}")
        if dev_acc > best_acc:
            best_acc = dev_acc
            model.save_pretrained(args.output_dir)
            with open(os.path.join(args.output_dir, "vocab.json"), "w") as f:
                json.dump(tok.itos, f)

    with open(os.path.join(args.output_dir, "history.json"), "w") as f:
        json.dump(history, f, indent=2)
    print(f"done, best dev acc {best_acc:.3f}")


if __name__ == "__main__":
    main()
