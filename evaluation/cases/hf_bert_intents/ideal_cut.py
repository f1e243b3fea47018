import torch
from transformers import BertConfig, BertForSequenceClassification

config = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, num_labels=3)
model = BertForSequenceClassification(config)
input_ids = torch.randint(0, 100, (32, 24))
labels = torch.arange(32) % 4          # 4 intents, 3-way head
model(input_ids=input_ids, labels=labels)
