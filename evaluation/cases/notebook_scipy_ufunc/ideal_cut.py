import scipy.special
import torch

torch.compile(lambda u: torch.as_tensor(scipy.special.erfinv(u.numpy())), fullgraph=True)(torch.rand(3))
