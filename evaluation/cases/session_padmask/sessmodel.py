"""Session encoder: item + event-type embeddings, a Transformer encoder over the
(last ``max_len`` events of the) session, masked mean pooling, purchase head."""
import math

import torch
import torch.nn as nn

EVENT_TYPES = ("view", "cart", "wishlist", "search")


class SinusoidalPositions(nn.Module):
    def __init__(self, dim, max_len=512):
        super().__init__()
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class SessionEncoder(nn.Module):
    def __init__(self, n_items, dim=64, heads=4, layers=2, ff=128, dropout=0.1):
        super().__init__()
        self.item_emb = nn.Embedding(n_items + 1, dim, padding_idx=0)
        self.event_emb = nn.Embedding(len(EVENT_TYPES) + 1, dim, padding_idx=0)
        self.pos = SinusoidalPositions(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, ff, dropout, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim + 1, dim), nn.ReLU(), nn.Linear(dim, 1))

    def forward(self, items, events, pad_mask, dwell):
        h = self.pos(self.item_emb(items) + self.event_emb(events))
        h = self.encoder(h, src_key_padding_mask=pad_mask)
        keep = (~pad_mask).unsqueeze(-1).float()
        pooled = self.norm((h * keep).sum(1) / keep.sum(1).clamp(min=1))
        return self.head(torch.cat([pooled, dwell.unsqueeze(-1)], -1)).squeeze(-1)


def lengths_to_padding_mask(lengths):
    """True where a position is padding."""
    max_len = int(lengths.max())
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def make_collate(max_len):
    def collate(batch):
        lengths = torch.tensor([len(s["items"]) for s in batch])
        width = min(int(lengths.max()), max_len)
        items = torch.zeros(len(batch), width, dtype=torch.long)
        events = torch.zeros(len(batch), width, dtype=torch.long)
        for i, s in enumerate(batch):
            it = s["items"][-max_len:]
            ev = s["events"][-max_len:]
            items[i, : len(it)] = torch.tensor(it)
            events[i, : len(ev)] = torch.tensor(ev)
        return {
            "items": items,
            "events": events,
            "pad_mask": lengths_to_padding_mask(lengths),
            "dwell": torch.tensor([s["dwell"] for s in batch], dtype=torch.float32),
            "label": torch.tensor([s["bought"] for s in batch], dtype=torch.float32),
        }
    return collate
