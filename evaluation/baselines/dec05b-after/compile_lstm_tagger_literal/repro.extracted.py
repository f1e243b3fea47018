import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab_size=12, emb_dim=8, hidden=16, num_tags=3, pad_id=0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.lstm = nn.LSTM(emb_dim, hidden, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, num_tags)

    def forward(self, tokens, mask):
        h = self.embed(tokens)
        h, _ = self.lstm(h)
        logits = self.proj(h)
        # padded positions can never be tagged
        return logits.masked_fill(~mask.unsqueeze(-1), -1e4)


x0 = torch.tensor([[1, 9, 3, 0], [4, 4, 7, 2]], dtype=torch.int64)
x1 = torch.tensor([[True, True, True, False], [True, True, True, True]], dtype=torch.bool)
model = Tagger().eval()
torch.compile(model, fullgraph=True)(x0, x1)
