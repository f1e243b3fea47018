# Compiling a small BiLSTM tagger with fullgraph=True fails; eager works.
#
# I want the whole forward in one graph (we export it later), so I use
# fullgraph=True.  Minimal example below with two literal inputs: token ids and a
# padding mask.  torch 2.13.0+cpu, Python 3.11, Linux.
import torch
import torch.nn as nn


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


torch.manual_seed(0)
model = Tagger().eval()

tokens = torch.tensor([[1, 9, 3, 0], [4, 4, 7, 2]])
mask = torch.tensor([[True, True, True, False], [True, True, True, True]])

with torch.no_grad():
    print("eager:", model(tokens, mask).argmax(-1))
    compiled = torch.compile(model, fullgraph=True)
    print("compiled:", compiled(tokens, mask).argmax(-1))
