#!/usr/bin/env python
# coding: utf-8

# # Shipping-notice NER: BiLSTM tagger over subwords with subword regularisation
#
# Exported from `ner_subword_regularisation.ipynb`. The corpus is synthetic (templates
# over a generated lexicon) so the notebook runs anywhere. Tags are BIO over
# PER / ORG / LOC / DATE; the tagger predicts one tag per subword and the first subword
# of every word carries the word's tag.

# In[1]:


import math
import os
import random
import time
from collections import Counter

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SEED = 1234
random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)
torch.set_num_threads(1)
pd.set_option("display.width", 120)


# In[2]:


# lexicon: pseudo-words from syllables
syll = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["str", "anth", "ell", "orn", "ix"]
rng = random.Random(SEED)


def make_word(lo, hi):
    return "".join(rng.choice(syll) for _ in range(rng.randint(lo, hi)))


common = [make_word(1, 3) for _ in range(900)]
first_names = [make_word(2, 3).capitalize() for _ in range(150)]
last_names = [make_word(2, 4).capitalize() for _ in range(200)]
places = [make_word(2, 4).capitalize() for _ in range(120)]
org_heads = [make_word(2, 3).capitalize() for _ in range(80)]
months = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
zipf = np.array([1 / (r + 1) ** 1.1 for r in range(len(common))])
zipf /= zipf.sum()
len(common), len(first_names), len(places)


# In[3]:


def entity(kind):
    if kind == "PER":
        return [rng.choice(first_names), rng.choice(last_names)]
    if kind == "ORG":
        return [rng.choice(org_heads)] + rng.choice([["Holdings"], ["Freight", "Lines"], ["Ltd"], []])
    if kind == "LOC":
        return [rng.choice(places)] + ([rng.choice(places)] if rng.random() < 0.25 else [])
    return [str(rng.randint(1, 28)), rng.choice(months), str(rng.randint(2015, 2024))]


def make_sentence():
    words, tags = [], []
    n_clauses = 1 + np.random.binomial(3, 0.35)
    for _ in range(n_clauses):
        for w in np.random.choice(common, size=np.random.randint(3, 9), p=zipf):
            words.append(w)
            tags.append("O")
        kind = rng.choice(["PER", "ORG", "LOC", "LOC", "DATE"])
        ent = entity(kind)
        words += ent
        tags += ["B-" + kind] + ["I-" + kind] * (len(ent) - 1)
    return words, tags


corpus = [make_sentence() for _ in range(6000)]
df = pd.DataFrame({"n_words": [len(w) for w, _ in corpus],
                   "n_ents": [sum(t.startswith("B-") for t in ts) for _, ts in corpus]})
print(df.describe().T)


# In[4]:


# subword vocabulary: greedy chunks of 3 characters ("##" marks continuation pieces)
def chunks(word, size):
    return [("" if i == 0 else "##") + word[i:i + size] for i in range(0, len(word), size)]


piece_counts = Counter(p for ws, _ in corpus for w in ws for size in (1, 2, 3) for p in chunks(w, size))
PAD, UNK, CLS, SEP = "[PAD]", "[UNK]", "[CLS]", "[SEP]"
itos = [PAD, UNK, CLS, SEP] + sorted(p for p, c in piece_counts.items() if c >= 2)
stoi = {p: i for i, p in enumerate(itos)}
TAGS = ["O"] + [f"{bi}-{k}" for k in ("PER", "ORG", "LOC", "DATE") for bi in "BI"]
tag2id = {t: i for i, t in enumerate(TAGS)}
IGNORE = -100
print(len(itos), "subwords,", len(TAGS), "tags")


# In[5]:


CFG = dict(max_len=80, split_p=0.08, batch_size=32, epochs=12, lr=2e-3, emb=64, hidden=48,
           ckpt_dir="checkpoints/ner_subword")


class SubwordNERDataset(Dataset):
    """Tokenises on the fly. In training mode each word is re-split with smaller pieces with
    probability split_p (subword regularisation, fresh every epoch)."""

    def __init__(self, sents, train, max_len, split_p):
        self.sents, self.train, self.max_len, self.split_p = sents, train, max_len, split_p
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.sents)

    def __getitem__(self, i):
        words, tags = self.sents[i]
        r = np.random.default_rng([SEED, self.epoch, i])
        ids, labels = [], []
        for w, t in zip(words, tags):
            size = 3
            if self.train and r.random() < self.split_p:
                size = int(r.choice([1, 2]))
            pieces = [stoi.get(p, stoi[UNK]) for p in chunks(w, size)]
            ids += pieces
            labels += [tag2id[t]] + [IGNORE] * (len(pieces) - 1)
        ids = [stoi[CLS]] + ids[:self.max_len - 2] + [stoi[SEP]]
        labels = [IGNORE] + labels[:self.max_len] + [IGNORE]
        return {"input_ids": ids, "labels": labels}


def pad_to(seqs, value):
    width = max(len(s) for s in seqs)
    return torch.tensor([s + [value] * (width - len(s)) for s in seqs])


def collate(batch):
    input_ids = pad_to([b["input_ids"] for b in batch], stoi[PAD])
    attention_mask = input_ids != stoi[PAD]
    labels = pad_to([b["labels"] for b in batch], 0)
    labels = torch.where(attention_mask, labels, IGNORE)
    return input_ids, attention_mask, labels


split = int(0.9 * len(corpus))
train_ds = SubwordNERDataset(corpus[:split], True, CFG["max_len"], CFG["split_p"])
val_ds = SubwordNERDataset(corpus[split:], False, CFG["max_len"], 0.0)
loader_gen = torch.Generator().manual_seed(SEED)
train_dl = DataLoader(train_ds, batch_size=CFG["batch_size"], shuffle=True, collate_fn=collate,
                      generator=loader_gen)
val_dl = DataLoader(val_ds, batch_size=128, collate_fn=collate)
next(iter(val_dl))[0].shape


# In[6]:


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab, n_tags, emb, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hidden, bidirectional=True, batch_first=True)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(2 * hidden, n_tags)

    def forward(self, ids, mask):
        lengths = mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(self.emb(ids)), lengths,
                                                   batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=ids.size(1))
        return self.out(self.drop(h))


model = BiLSTMTagger(len(itos), len(TAGS), CFG["emb"], CFG["hidden"])
opt = torch.optim.Adam(model.parameters(), lr=CFG["lr"])
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=CFG["lr"], epochs=CFG["epochs"],
                                            steps_per_epoch=len(train_dl))
sum(p.numel() for p in model.parameters())


# In[7]:


def spans(tag_ids):
    out, start, kind = set(), None, None
    for i, t in enumerate(list(tag_ids) + [0]):
        tag = TAGS[t]
        if start is not None and not tag.startswith("I-" + kind):
            out.add((start, i, kind))
            start = None
        if tag.startswith("B-"):
            start, kind = i, tag[2:]
    return out


@torch.no_grad()
def evaluate(dl):
    model.eval()
    tp = fp = fn = 0
    loss_sum, n = 0.0, 0
    for ids, mask, labels in dl:
        logits = model(ids, mask)
        loss_sum += F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=IGNORE).item()
        n += 1
        pred = logits.argmax(-1)
        for p, g in zip(pred, labels):
            keep = g != IGNORE
            ps, gs = spans(p[keep].tolist()), spans(g[keep].tolist())
            tp, fp, fn = tp + len(ps & gs), fp + len(ps - gs), fn + len(gs - ps)
    model.train()
    f1 = 2 * tp / max(1, 2 * tp + fp + fn)
    return loss_sum / n, f1


# In[8]:


os.makedirs(CFG["ckpt_dir"], exist_ok=True)
history, best_f1, t0 = [], 0.0, time.time()
for epoch in range(CFG["epochs"]):
    train_ds.set_epoch(epoch)
    running = 0.0
    for step, (ids, mask, labels) in enumerate(train_dl):
        logits = model(ids, mask)
        loss = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=IGNORE)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
        running += loss.item()
        if step % 50 == 0:
            print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}")
    val_loss, val_f1 = evaluate(val_dl)
    history.append(dict(epoch=epoch, train_loss=running / len(train_dl), val_loss=val_loss,
                        val_f1=val_f1, minutes=(time.time() - t0) / 60))
    print(history[-1])
    if val_f1 > best_f1:
        best_f1 = val_f1
        torch.save({"model": model.state_dict(), "epoch": epoch, "itos": itos, "tags": TAGS},
                   os.path.join(CFG["ckpt_dir"], "best.pt"))


# In[9]:


pd.DataFrame(history).set_index("epoch")


# In[10]:


ckpt = torch.load(os.path.join(CFG["ckpt_dir"], "best.pt"))
model.load_state_dict(ckpt["model"])
print("best epoch", ckpt["epoch"], "val loss / f1", evaluate(val_dl))
