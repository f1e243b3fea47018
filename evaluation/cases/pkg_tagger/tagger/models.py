import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD_ID = 0
MAX_LEN = 32


@dataclass
class TaggerConfig:
    vocab_size: int
    num_tags: int
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    dropout: float = 0.1
    max_len: int = MAX_LEN


class SelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        assert d_model % n_heads == 0
        self.h = n_heads
        self.dk = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, pad_mask):
        # x: (B, T, D); pad_mask: (B, T) True where padding
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.h, self.dk).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dk)
        scores = scores.masked_fill(pad_mask[:, None, None, :], float("-inf"))
        attn = self.drop(scores.softmax(dim=-1))
        y = (attn @ v).transpose(1, 2).reshape(B, T, D)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, cfg: TaggerConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, pad_mask):
        x = x + self.drop(self.attn(self.ln1(x), pad_mask))
        x = x + self.drop(self.ff(self.ln2(x)))
        return x


class TransformerTagger(nn.Module):
    def __init__(self, cfg: TaggerConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.classifier = nn.Linear(cfg.d_model, cfg.num_tags)

    def forward(self, tokens, pad_mask):
        T = tokens.size(1)
        pos = torch.arange(T, device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)[None]
        for blk in self.blocks:
            x = blk(x, pad_mask)
        return self.classifier(self.ln(x))

    def loss(self, tokens, pad_mask, tags):
        logits = self(tokens, pad_mask)
        return F.cross_entropy(logits.flatten(0, 1), tags.flatten(), ignore_index=-100)
