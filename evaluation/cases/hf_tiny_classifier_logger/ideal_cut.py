import logging

import torch

logger = logging.getLogger(__name__)


@torch.compile(fullgraph=True)
def f(x):
    logger.warning("x")
    return x + 1


f(torch.randn(4))
