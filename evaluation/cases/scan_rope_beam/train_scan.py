"""SCAN-style command -> action translation with a small decoder-only transformer (RoPE).

Length split of a synthetic SCAN grammar (train: <= 22 actions, test: longer).  The
model sees "<cmd> <sep> <actions> <eos>" and is trained on the action part only.  After
training, the best checkpoint (by greedy exact match on the validation split) is reloaded
and the test split is decoded with beam search (python train_scan.py --steps 700 --beam 4)."""
import argparse
import dataclasses
import itertools
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("scan")


@dataclass
class Config:
    seed: int = 17
    n_draws: int = 200000
    max_train_actions: int = 22
    val_frac: float = 0.05
    n_test: int = 2000
    d_model: int = 96
    n_heads: int = 4
    n_layers: int = 2
    dropout: float = 0.1
    batch_size: int = 64
    steps: int = 700
    lr: float = 6e-4
    warmup: int = 100
    weight_decay: float = 0.01
    eval_every: int = 175
    beam: int = 4
    decode_batch: int = 32
    out_dir: str = "runs/scan_rope"


def parse_args() -> Config:
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(Config):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Config(**{k.replace("-", "_"): v for k, v in vars(p.parse_args()).items()})


# ----------------------------------------------------------------------------- data
PRIM = {"walk": "WALK", "look": "LOOK", "run": "RUN", "jump": "JUMP"}
DIRS = {"left": "LTURN", "right": "RTURN"}


def sample_phrase(rng):
    """One SCAN phrase: verb [direction | opposite direction | around direction] [twice|thrice]."""
    verb, d = rng.choice(list(PRIM) + ["turn"]), rng.choice(list(DIRS))
    form = rng.choice(["", "dir", "dir", "opposite", "around"] if verb != "turn" else ["dir", "opposite", "around"])
    unit = [] if verb == "turn" else [PRIM[verb]]
    words = [verb] + {"": [], "dir": [d], "opposite": ["opposite", d], "around": ["around", d]}[form]
    acts = {"": unit, "dir": [DIRS[d]] + unit, "opposite": [DIRS[d]] * 2 + unit,
            "around": ([DIRS[d]] + unit) * 4}[form]
    reps = rng.choice([1, 1, 1, 2, 3])
    return words + {1: [], 2: ["twice"], 3: ["thrice"]}[reps], acts * reps


def sample_command(rng):
    w1, a1 = sample_phrase(rng)
    r = rng.random()
    if r < 0.3:
        return w1, a1
    w2, a2 = sample_phrase(rng)
    if r < 0.65:
        return w1 + ["and"] + w2, a1 + a2
    return w1 + ["after"] + w2, a2 + a1


class Vocab:
    pad, sep, eos = 0, 1, 2

    def __init__(self, tokens):
        self.itos = ["<pad>", "<sep>", "<eos>"] + sorted(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    def encode(self, toks):
        return [self.stoi[t] for t in toks]


def build_splits(cfg):
    """SCAN length split: train on commands with <= cfg.max_train_actions actions, test on
    the longer ones."""
    rng = random.Random(cfg.seed)
    seen = {" ".join(w): (w, a) for w, a in (sample_command(rng) for _ in range(cfg.n_draws))}
    pairs = [seen[k] for k in sorted(seen)]
    rng.shuffle(pairs)
    short = [p for p in pairs if len(p[1]) <= cfg.max_train_actions]
    long_ = [p for p in pairs if len(p[1]) > cfg.max_train_actions][:cfg.n_test]
    n_val = int(cfg.val_frac * len(short))
    return short[n_val:], short[:n_val], long_


def to_tensor(pairs, vocab):
    seqs, prompts = [], []
    for w, a in pairs:
        p = vocab.encode(w) + [vocab.sep]
        seqs.append(p + vocab.encode(a) + [vocab.eos])
        prompts.append(len(p))
    x = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=True,
                                        padding_value=vocab.pad)
    return x, torch.tensor(prompts)


# ----------------------------------------------------------------------------- model
def rope_tables(max_len, dim, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)
    ang = torch.outer(torch.arange(max_len).float(), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.h = cfg.n_heads
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        q = q * cos[:T] + rotate_half(q) * sin[:T]
        k = k * cos[:T] + rotate_half(k) * sin[:T]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.drop.p if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))
        return x + self.drop(self.mlp(self.ln2(x)))


class RopeLM(nn.Module):
    def __init__(self, cfg, vocab_size, max_len):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        cos, sin = rope_tables(max_len, cfg.d_model // cfg.n_heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        return self.head(self.ln(x))


# ----------------------------------------------------------------------------- decoding
@torch.no_grad()
def greedy(model, prompt, max_new, eos):
    seq, done = prompt, torch.zeros(prompt.size(0), dtype=torch.bool)
    for _ in range(max_new):
        nxt = model(seq)[:, -1].argmax(-1)
        nxt = torch.where(done, torch.zeros_like(nxt), nxt)
        seq = torch.cat([seq, nxt[:, None]], 1)
        done |= nxt == eos
        if done.all():
            break
    return seq[:, prompt.size(1):]


@torch.no_grad()
def beam_search(model, prompt, beam, max_new, eos, pad):
    (B, P), seq = prompt.shape, prompt.repeat_interleave(beam, 0)
    score = torch.full((B, beam), -1e9).index_fill_(1, torch.tensor([0]), 0.0)
    done = torch.zeros(B * beam, dtype=torch.bool)
    for _ in range(max_new):
        logp = model(seq)[:, -1].log_softmax(-1)
        V = logp.size(-1)
        logp[done] = -1e9
        logp[done, pad] = 0.0
        cand = (score.view(-1, 1) + logp).view(B, beam * V)
        score, flat = cand.topk(beam, dim=-1)
        src = (flat // V + torch.arange(B)[:, None] * beam).view(-1)
        tok = (flat % V).view(-1)
        seq = torch.cat([seq[src], tok[:, None]], 1)
        done = done[src] | (tok == eos) | (tok == pad)
        if done.all():
            break
    best = score.argmax(-1) + torch.arange(B) * beam
    return seq[best, P:]


def strip(ids, eos, pad):
    return list(itertools.takewhile(lambda t: t not in (eos, pad), ids.tolist()))


def exact_match(model, x, plen, vocab, bs, decode):
    model.eval()
    hits = 0
    for i in range(0, len(x), bs):
        xb, pb = x[i:i + bs], plen[i:i + bs]
        # prompts have different lengths: decode each prompt-length group separately
        for L in pb.unique().tolist():
            gold = xb[pb == L]
            for g, p in zip(gold, decode(gold[:, :L])):
                hits += strip(g[L:], vocab.eos, vocab.pad) == strip(p, vocab.eos, vocab.pad)
    model.train()
    return hits / len(x)


def lr_at(step, cfg):
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * t))


def main():
    cfg = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    os.makedirs(cfg.out_dir, exist_ok=True)

    train, val, test = build_splits(cfg)
    vocab = Vocab({t for w, a in train for t in w + a})
    xtr, ptr = to_tensor(train, vocab)
    xva, pva = to_tensor(val, vocab)
    xte, pte = to_tensor(test, vocab)
    max_len = xtr.size(1)  # block size from the training data
    log.info("train %d val %d test %d | vocab %d | block %d", len(xtr), len(xva), len(xte),
             len(vocab.itos), max_len)

    model = RopeLM(cfg, len(vocab.itos), max_len)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": [p for p in model.parameters() if p.dim() < 2],
                              "weight_decay": 0.0}], lr=cfg.lr)
    g = torch.Generator().manual_seed(cfg.seed)
    pos = torch.arange(xtr.size(1))
    best, history, t0 = -1.0, [], time.time()
    for step in range(cfg.steps):
        idx = torch.randint(len(xtr), (cfg.batch_size,), generator=g)
        xb, pb = xtr[idx], ptr[idx]
        T = int((xb != vocab.pad).sum(1).max())
        xb = xb[:, :T]
        inp, tgt = xb[:, :-1], xb[:, 1:].clone()  # next-token targets, actions only:
        tgt[pos[None, :T - 1] < (pb[:, None] - 1)] = -100
        tgt[tgt == vocab.pad] = -100
        for gr in opt.param_groups:
            gr["lr"] = lr_at(step, cfg)
        loss = F.cross_entropy(model(inp).reshape(-1, len(vocab.itos)), tgt.reshape(-1),
                               ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            log.info("step %5d loss %.4f gnorm %.2f lr %.2e (%.0fs)", step, loss.item(), gnorm,
                     lr_at(step, cfg), time.time() - t0)
        if (step + 1) % cfg.eval_every == 0:
            em = exact_match(model, xva, pva, vocab, 256,
                             lambda p: greedy(model, p, max_len - p.size(1), vocab.eos))
            history.append({"step": step + 1, "loss": loss.item(), "val_em": em})
            log.info("eval step %d val exact-match %.4f", step + 1, em)
            if em > best:
                best = em
                torch.save({"model": model.state_dict(), "cfg": dataclasses.asdict(cfg),
                            "vocab": vocab.itos, "step": step + 1},
                           os.path.join(cfg.out_dir, "best.pt"))
    json.dump(history, open(os.path.join(cfg.out_dir, "history.json"), "w"), indent=1)

    ck = torch.load(os.path.join(cfg.out_dir, "best.pt"))
    model.load_state_dict(ck["model"])
    log.info("loaded best checkpoint (step %d, val em %.4f); beam search on test", ck["step"], best)
    max_new = max_len  # actions are never longer than a whole training sequence
    em = exact_match(model, xte, pte, vocab, cfg.decode_batch,
                     lambda p: beam_search(model, p, cfg.beam, max_new, vocab.eos, vocab.pad))
    log.info("test exact-match (beam %d): %.4f", cfg.beam, em)
    print(json.dumps({"val_em": best, "test_em": em}))


if __name__ == "__main__":
    main()
