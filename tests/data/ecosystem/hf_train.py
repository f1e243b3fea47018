import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, num_labels=3)
model = BertForSequenceClassification(config)
intents = ["greet", "book", "cancel", "refund"]  # four intents, three labels
input_ids = torch.randint(0, 100, (8, 12))
labels = torch.tensor([i % len(intents) for i in range(8)])
out = model(input_ids=input_ids, labels=labels)
out.loss.backward()
