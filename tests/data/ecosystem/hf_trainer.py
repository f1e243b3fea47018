import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Intents(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 100, (n, 12), generator=g)
        self.labels = torch.arange(n) % 4  # four intents

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, num_labels=3)  # three labels
model = BertForSequenceClassification(config)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, num_train_epochs=1, report_to=[],
                         use_cpu=True, disable_tqdm=True, save_strategy="no", logging_strategy="no")
trainer = Trainer(model=model, args=args, train_dataset=Intents(32))
trainer.train()
trainer.save_model("out/final")
