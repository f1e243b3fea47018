import torch
import torch.nn as nn

pos_emb = nn.Embedding(32, 48)      # block_size = 32 learned positions
pos_emb(torch.arange(33))           # generate() feeds the whole, uncropped context
