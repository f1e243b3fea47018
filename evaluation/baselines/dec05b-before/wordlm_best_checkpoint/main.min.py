# Word-level language model (LSTM) trained on a synthetic corpus.
#
#   python main.py --epochs 2 --save model.pt
#
# The corpus is generated on first use into ./data/synthetic/{train,valid,test}.txt
# (a bigram "language" over a Zipf-distributed vocabulary), so the script runs anywhere.
import argparse

import torch
import torch.nn as nn
args = argparse.Namespace()

torch.manual_seed(1111)


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)


model = RNNModel('LSTM', 1386, 96, 96, 2)
with open('model.pt', "wb") as f:
    torch.save({"epoch": 1, "model_state_dict": model.state_dict(), "lr": 20,
                "val_loss": 0, "args": vars(args)}, f)

with open('model.pt', "rb") as f:
    model.load_state_dict(torch.load(f))
