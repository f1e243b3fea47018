import torch
import torch.nn.functional as F

# 7 queues in the model head; the DRW weights come from per-queue validation recall, and
# the validation week has no ticket of the retired fax_orders queue, so only 6 weights
recalls = torch.rand(6)
weight = 1.0 / (recalls + 0.1)
logits = torch.randn(128, 7)                     # first evaluation batch after epoch 4
labels = torch.randint(0, 6, (128,))
F.cross_entropy(logits, labels, weight=weight * 6 / weight.sum())
