#!/usr/bin/env python
# coding: utf-8

# # Tiny sentence classifier with a hand-written transformer encoder
#
# Exported from `char_transformer.ipynb`. Task: does a synthetic "sentence" of tokens
# contain the motif `7 3 7`? Sentences have different lengths and are right-padded.

# In[1]:


import math
import random
import time
import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 11
random.seed(SEED); np.random.seed(SEED); torch.manual_seed(SEED)
torch.set_num_threads(2)


# In[2]:


VOCAB = 32
PAD = 0
MAX_LEN = 48
N_TRAIN, N_VAL = 3000, 600
hparams = {"d_model": 64, "n_heads": 4, "n_layers": 2, "ff": 128, "dropout": 0.1,
           "lr": 1e-3, "batch_size": 64, "epochs": 2}
hparams


# In[3]:


def make_sentence(rng):
    n = rng.randint(12, MAX_LEN)
    toks = [rng.randint(1, VOCAB - 1) for _ in range(n)]
    has = rng.random() < 0.5
    if has:
        p = rng.randint(0, n - 3)
        toks[p:p + 3] = [7, 3, 7]
    else:
        s = " ".join(map(str, toks))
        while "7 3 7" in s:
            toks = [rng.randint(1, VOCAB - 1) for _ in range(n)]
            s = " ".join(map(str, toks))
    return toks, int(has)

rng = random.Random(SEED)
train_raw = [make_sentence(rng) for _ in range(N_TRAIN)]
val_raw = [make_sentence(rng) for _ in range(N_VAL)]
print(len(train_raw), len(val_raw), sum(y for _, y in train_raw) / len(train_raw))


# In[4]:


def pad_batch(items):
    L = max(len(t) for t, _ in items)
    ids = torch.full((len(items), L), PAD, dtype=torch.long)
    for i, (t, _) in enumerate(items):
        ids[i, :len(t)] = torch.tensor(t)
    labels = torch.tensor([y for _, y in items])
    attention_mask = (ids != PAD).long()      # HF-style 1 = keep, 0 = pad
    return {"input_ids": ids, "attention_mask": attention_mask, "labels": labels}

def batches(raw, bs, shuffle):
    order = list(range(len(raw)))
    if shuffle:
        random.shuffle(order)
    for i in range(0, len(order), bs):
        yield pad_batch([raw[j] for j in order[i:i + bs]])

b = pad_batch(train_raw[:3]); {k: v.shape for k, v in b.items()}


# In[5]:


class MHA(nn.Module):
    def __init__(self, d, h, p):
        super().__init__()
        self.h, self.dk = h, d // h
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.p = p

    def forward(self, x, mask=None):
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        attn_mask = None
        if mask is not None:
            attn_mask = mask[:, None, None, :]           # (B, 1, 1, L) broadcast over heads/queries
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                           dropout_p=self.p if self.training else 0.0)
        return self.o(y.transpose(1, 2).reshape(B, L, D))

class Block(nn.Module):
    def __init__(self, d, h, ff, p):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = MHA(d, h, p)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d), nn.Dropout(p))

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.ff(self.ln2(x))

class Classifier(nn.Module):
    def __init__(self, hp):
        super().__init__()
        d = hp["d_model"]
        self.tok = nn.Embedding(VOCAB, d, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(MAX_LEN, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, hp["n_heads"], hp["ff"], hp["dropout"]) for _ in range(hp["n_layers"])])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 2)

    def forward(self, input_ids, attention_mask=None):
        L = input_ids.size(1)
        x = self.tok(input_ids) + self.pos[:L]
        for blk in self.blocks:
            x = blk(x, attention_mask)
        x = self.norm(x)
        if attention_mask is None:
            pooled = x.mean(1)
        else:
            m = attention_mask.unsqueeze(-1).float()
            pooled = (x * m).sum(1) / m.sum(1).clamp(min=1)
        return self.head(pooled)

model = Classifier(hparams)
sum(p.numel() for p in model.parameters())


# In[6]:


opt = torch.optim.AdamW(model.parameters(), lr=hparams["lr"], weight_decay=0.01)
history = []

def evaluate(model, raw):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for batch in batches(raw, 128, shuffle=False):
            logits = model(batch["input_ids"], batch["attention_mask"])
            loss_sum += F.cross_entropy(logits, batch["labels"], reduction="sum").item()
            correct += (logits.argmax(-1) == batch["labels"]).sum().item()
            total += len(batch["labels"])
    model.train()
    return loss_sum / total, correct / total


# In[7]:


# first pass: train without the padding mask (pads are few, quick sanity check)
t0 = time.time()
for epoch in range(hparams["epochs"]):
    for step, batch in enumerate(batches(train_raw, hparams["batch_size"], shuffle=True)):
        logits = model(batch["input_ids"])
        loss = F.cross_entropy(logits, batch["labels"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
        if step % 20 == 0:
            print(f"epoch {epoch} step {step:3d} loss {np.mean(history[-20:]):.4f}")
print(f"trained in {time.time() - t0:.1f}s")


# In[8]:


val_loss, val_acc = evaluate(model, val_raw)
print(f"val loss {val_loss:.4f}  acc {val_acc:.3f}")


# In[9]:


torch.save({"model": model.state_dict(), "hparams": hparams}, "classifier.pt")
with open("metrics.json", "w") as f:
    json.dump({"val_loss": val_loss, "val_acc": val_acc, "train_curve": history[::10]}, f)
