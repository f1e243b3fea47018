# Compiling a small BiLSTM tagger with fullgraph=True fails; eager works.
#
# I want the whole forward in one graph (we export it later), so I use
# fullgraph=True.  Minimal example below with two literal inputs: token ids and a
# padding mask.  torch 2.13.0+cpu, Python 3.11, Linux.
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab_size=12, emb_dim=8, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.lstm = nn.LSTM(emb_dim, hidden)

    def forward(self, tokens, mask):
        self.lstm(self.embed(tokens))


torch.manual_seed(0)
import pathlib
torch.compile(Tagger(), fullgraph=True).forward(*torch.load(pathlib.Path(__file__).with_name('repro.call.pt'))['args'])
