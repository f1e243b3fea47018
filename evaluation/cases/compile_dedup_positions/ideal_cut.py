import torch


def f(ids):
    seen = {}
    for pos, tok in enumerate(ids.tolist()):
        seen.setdefault(tok, pos)
    return ids


torch.compile(f, fullgraph=True)(torch.tensor([1, 9, 3]))
