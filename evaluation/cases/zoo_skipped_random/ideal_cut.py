import random
import torch

torch.compile(lambda x: x * random.random(), fullgraph=True)(torch.ones(1))
