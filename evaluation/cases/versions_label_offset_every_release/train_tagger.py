"""A 5-tag sequence tagger whose tag ids come from a file that numbers tags 1..5."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(11)
TAGS = {"O": 1, "B-PER": 2, "I-PER": 3, "B-LOC": 4, "I-LOC": 5}  # as exported by the annotation tool
names = list(TAGS)
sentences = torch.randint(0, 50, (16, 9))
tags = torch.tensor([[TAGS[names[(w * 7 + 3) % 5]] for w in row] for row in sentences.tolist()])

emb = nn.Embedding(50, 24)
rnn = nn.GRU(24, 24, batch_first=True)
head = nn.Linear(24, len(TAGS))
params = list(emb.parameters()) + list(rnn.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, lr=1e-2)
for epoch in range(3):
    out, _ = rnn(emb(sentences))
    logits = head(out)
    loss = F.cross_entropy(logits.reshape(-1, len(TAGS)), tags.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
