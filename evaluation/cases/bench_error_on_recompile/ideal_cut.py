import torch


def ema_update(p, decay):
    return p * decay


f = torch.compile(ema_update)
f(torch.ones(1), 0.1)
torch._dynamo.config.error_on_recompile = True
f(torch.ones(1), 0.2)
