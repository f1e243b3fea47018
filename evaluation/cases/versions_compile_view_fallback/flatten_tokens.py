"""A token-flattening helper compiled with fullgraph=True: a view where the layout
allows it, a copy otherwise (the transpose makes it non-contiguous)."""
import torch


@torch.compile(fullgraph=True, backend="eager")
def flatten_tokens(hidden):
    tokens = hidden.transpose(0, 1)
    try:
        return tokens.view(-1, tokens.shape[-1] * tokens.shape[-2])
    except RuntimeError:  # not viewable: fall back to a copy
        return tokens.reshape(-1, tokens.shape[-1] * tokens.shape[-2])


batch = torch.randn(8, 4, 16)
flat = flatten_tokens(batch)
print(flat.shape, float(flat.abs().mean()))
