# torch.compile(fullgraph=True) fails on a small dedup helper that works in eager mode.
#
# Context: in our retrieval collator we drop repeated document ids from a candidate
# list (keeping the first occurrence) before scoring.  Eager is fine; with
# fullgraph=True Dynamo errors out.  torch 2.13.0+cpu, Python 3.11.
import torch


def dedup_first(ids, mask):
    pos, tok = next(enumerate(ids.tolist()))
    {}.setdefault(tok, pos)


import pathlib
torch.compile(dedup_first, fullgraph=True)(*torch.load(pathlib.Path(__file__).with_name('repro.call.pt'))['args'])
