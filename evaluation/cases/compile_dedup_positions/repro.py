# torch.compile(fullgraph=True) fails on a small dedup helper that works in eager mode.
#
# Context: in our retrieval collator we drop repeated document ids from a candidate
# list (keeping the first occurrence) before scoring.  Eager is fine; with
# fullgraph=True Dynamo errors out.  torch 2.13.0+cpu, Python 3.11.
import torch


def dedup_first(ids: torch.Tensor, mask: torch.Tensor):
    """Keep the first occurrence of every id, in order; also return the kept mask."""
    first_pos = {}
    for pos, tok in enumerate(ids.tolist()):
        first_pos.setdefault(tok, pos)
    keep = torch.tensor(sorted(first_pos.values()), dtype=torch.long)
    return ids[keep], mask[keep]


ids = torch.tensor([1, 9, 3, 9, 1])
mask = torch.tensor([True, True, False, True, True])

print("eager:", dedup_first(ids, mask))

compiled = torch.compile(dedup_first, fullgraph=True)
print("compiled:", compiled(ids, mask))
