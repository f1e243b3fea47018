"""Fine-tune a tiny BERT (built from a config: nothing downloaded) on a synthetic
two-class task with the Trainer, evaluating every epoch, as a 2024 tutorial did."""
import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

torch.manual_seed(0)


class Pairs(Dataset):
    def __init__(self, n):
        self.ids = torch.randint(5, 100, (n, 12))
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(12, dtype=torch.long), "labels": self.labels[i]}


config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                    num_labels=2)
model = BertForSequenceClassification(config)
args = TrainingArguments(
    output_dir="runs/tiny",
    num_train_epochs=1,
    per_device_train_batch_size=16,
    evaluation_strategy="epoch",
    save_strategy="no",
    report_to=[],
    use_cpu=True,
)
trainer = Trainer(model=model, args=args, train_dataset=Pairs(64), eval_dataset=Pairs(32))
trainer.train()
print(trainer.evaluate())
