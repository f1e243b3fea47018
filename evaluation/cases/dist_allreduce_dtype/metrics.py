"""Metric accumulators shared by our training scripts."""
import torch
import torch.distributed as dist


class AverageMeter:
    """Running sum/count that can be averaged across ranks."""

    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.sum = 0
        self.count = 0

    def update(self, value, n=1):
        self.sum += value * n
        self.count += n

    @property
    def avg(self):
        return self.sum / self.count if self.count else 0.0

    def all_reduce(self):
        if not (dist.is_available() and dist.is_initialized()):
            return self.avg
        buf = torch.tensor([self.sum, self.count])
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        total, count = buf.tolist()
        return total / count if count else 0.0


class ConfusionMatrix:
    def __init__(self, n):
        self.m = torch.zeros(n, n, dtype=torch.long)

    def update(self, pred, target):
        idx = target * self.m.shape[0] + pred
        self.m += torch.bincount(idx, minlength=self.m.numel()).view_as(self.m)

    def all_reduce(self):
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(self.m)
        return self.m

    def per_class_recall(self):
        return (self.m.diag().float() / self.m.sum(1).clamp(min=1).float()).tolist()
