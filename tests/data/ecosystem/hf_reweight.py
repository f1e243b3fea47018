import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments


class Intents(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 100, (n, 12), generator=g)
        self.labels = torch.arange(n) % 4  # four intents

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class Reweight(TrainerCallback):
    """After each epoch, one weight per intent the last report listed."""

    def __init__(self, holder):
        self.holder = holder

    def on_epoch_end(self, args, state, control, **kwargs):
        listed = ["greet", "order", "cancel"]  # the report leaves out the fourth intent
        self.holder[0].class_weights = torch.ones(len(listed))


class WeightedTrainer(Trainer):
    class_weights = None

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        logits = model(**inputs).logits
        weight = self.class_weights if self.state.epoch >= 2 else None
        loss = F.cross_entropy(logits, labels, weight=weight)
        return (loss, logits) if return_outputs else loss


config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, num_labels=4)
model = BertForSequenceClassification(config)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, num_train_epochs=3, report_to=[],
                         use_cpu=True, disable_tqdm=True, save_strategy="no", logging_strategy="no")
holder = [None]
trainer = WeightedTrainer(model=model, args=args, train_dataset=Intents(32), callbacks=[Reweight(holder)])
holder[0] = trainer
trainer.train()
trainer.save_model("out/final")
