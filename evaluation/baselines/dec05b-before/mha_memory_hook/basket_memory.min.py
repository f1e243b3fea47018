from collections import OrderedDict

import torch
import torch.nn as nn


class EpisodicMemory(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.label_emb = nn.Embedding(1, 32)
        self.register_buffer("keys", torch.empty(0, 32))
        self.register_buffer("values", torch.empty(0, 32))

    def read_hook(self, module, inputs, output):
        self.attn(output, self.keys.expand(32, -1, -1), self.values.expand(32, -1, -1), need_weights=False)
        self.keys = torch.cat([self.keys, output.mean(dim=1)])


def batches(x, y, bs):
    order = torch.arange(len(x))
    for i in range(0, len(x), bs):
        idx = order[i:i + bs]
        yield x[idx], y[idx]


torch.manual_seed(11)
x_tr = torch.randn(320, 8, 12)
y_tr = torch.zeros(320, dtype=torch.int64)
model = nn.Sequential(OrderedDict(
    encoder=nn.Linear(12, 32),
))
memory = EpisodicMemory()
model.encoder.register_forward_hook(memory.read_hook)
for xb, yb in batches(x_tr, y_tr, 32):
    model(xb)
    memory.values = torch.cat([memory.values, memory.label_emb(yb)])
correct = 0
for xb, yb in batches(x_tr, y_tr, 32):
    correct += (model(xb) == yb).sum()
