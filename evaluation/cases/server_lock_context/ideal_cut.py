import threading
import torch

lock = threading.Lock()


def f(x):
    with lock:
        return x + 1


torch.compile(f, fullgraph=True)(torch.ones(1))
