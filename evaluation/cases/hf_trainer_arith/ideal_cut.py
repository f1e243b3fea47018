import torch
from transformers import GPT2Config, GPT2LMHeadModel

model = GPT2LMHeadModel(GPT2Config(vocab_size=12, n_positions=32, n_embd=64, n_layer=2, n_head=4))
input_ids = torch.full((64, 14), 12)      # <pad> = 12: the tokenizer has 15 ids, the config 12
model(input_ids=input_ids)
