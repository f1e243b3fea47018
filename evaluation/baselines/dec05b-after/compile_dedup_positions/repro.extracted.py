import torch


def dedup_first(ids: torch.Tensor, mask: torch.Tensor):
    """Keep the first occurrence of every id, in order; also return the kept mask."""
    first_pos = {}
    for pos, tok in enumerate(ids.tolist()):
        first_pos.setdefault(tok, pos)
    keep = torch.tensor(sorted(first_pos.values()), dtype=torch.long)
    return ids[keep], mask[keep]


x0 = torch.tensor([1, 9, 3, 9, 1], dtype=torch.int64)
x1 = torch.tensor([True, True, False, True, True], dtype=torch.bool)
torch.compile(dedup_first, fullgraph=True)(x0, x1)
