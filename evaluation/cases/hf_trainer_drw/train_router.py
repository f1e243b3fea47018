#!/usr/bin/env python
"""Ticket router: classify support tickets into queues with a small BERT trained from scratch.

Uses the HF Trainer with deferred re-weighting (DRW): plain cross-entropy for the first
`--drw-start` epochs, then class weights derived from the per-queue validation recall of
the last evaluation, so that queues the model under-serves get more weight.

The ticket export is synthesised here (token ids from a queue-specific topic mixture);
validation is the most recent week of tickets.
"""
import argparse
import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset
from transformers import (BertConfig, BertForSequenceClassification, Trainer, TrainerCallback,
                          TrainingArguments, set_seed)
from transformers.utils import logging as hf_logging

logger = logging.getLogger("router")

QUEUES = ["billing", "shipping", "returns", "technical", "account", "sales", "fax_orders"]
RETIRED = {"fax_orders": 0.8}  # queue closed at 80% of the export period
PAD_ID, CLS_ID, VOCAB = 0, 1, 3000


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-tickets", type=int, default=5500)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--epochs", type=int, default=7)
    p.add_argument("--drw-start", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--output-dir", default="runs/ticket_router")
    p.add_argument("--seed", type=int, default=7)
    return p.parse_args()


def synth_export(n, max_len, seed):
    """Returns (token lists, queue ids, timestamps in [0, 1))."""
    rng = np.random.default_rng(seed)
    prior = np.array([0.26, 0.2, 0.17, 0.16, 0.11, 0.07, 0.03])
    topics = rng.dirichlet(np.full(VOCAB - 2, 0.05), size=len(QUEUES))
    background = rng.dirichlet(np.full(VOCAB - 2, 1.0))
    t = np.sort(rng.uniform(0, 1, size=n))
    docs, labels = [], []
    for ti in t:
        q = rng.choice(len(QUEUES), p=prior)
        while QUEUES[q] in RETIRED and ti >= RETIRED[QUEUES[q]]:
            q = rng.choice(len(QUEUES), p=prior)
        length = int(np.clip(rng.lognormal(3.2, 0.45), 6, max_len - 1))
        mix = 0.35 + 0.3 * rng.random()
        from_topic = rng.random(length) < mix
        toks = np.where(from_topic, rng.choice(VOCAB - 2, size=length, p=topics[q]),
                        rng.choice(VOCAB - 2, size=length, p=background)) + 2
        docs.append([CLS_ID] + toks.tolist())
        labels.append(int(q))
    return docs, np.array(labels), t


class TicketDataset(Dataset):
    def __init__(self, docs, labels):
        self.docs, self.labels = docs, labels

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, i):
        return {"input_ids": self.docs[i], "labels": int(self.labels[i])}


def collate(features):
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), PAD_ID, dtype=torch.long)
    for i, f in enumerate(features):
        ids[i, :len(f["input_ids"])] = torch.tensor(f["input_ids"])
    return {"input_ids": ids, "attention_mask": (ids != PAD_ID).long(),
            "labels": torch.tensor([f["labels"] for f in features])}


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    preds = logits.argmax(-1)
    out = {"accuracy": float((preds == labels).mean())}
    recalls = []
    for c in np.unique(labels):
        r = float((preds[labels == c] == c).mean())
        out[f"recall_{QUEUES[c]}"] = r
        recalls.append(r)
    out["macro_recall"] = float(np.mean(recalls))
    return out


class DRWTrainer(Trainer):
    def __init__(self, *args, drw_start=4, **kwargs):
        super().__init__(*args, **kwargs)
        self.drw_start = drw_start
        self.class_weights = None

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        weight = None
        if self.class_weights is not None and self.state.epoch >= self.drw_start:
            weight = self.class_weights.to(outputs.logits.device)
        loss = F.cross_entropy(outputs.logits, labels, weight=weight)
        return (loss, outputs) if return_outputs else loss


class RecallReweighting(TrainerCallback):
    """After every evaluation, turn per-queue recall into class weights for DRW."""

    def __init__(self, trainer_ref, smoothing=0.1):
        self.trainer_ref, self.smoothing = trainer_ref, smoothing

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        recalls = [metrics[f"eval_recall_{q}"] for q in QUEUES if f"eval_recall_{q}" in metrics]
        w = 1.0 / (torch.tensor(recalls) + self.smoothing)
        self.trainer_ref[0].class_weights = w * len(w) / w.sum()
        logger.info("epoch %.1f: DRW weights %s", state.epoch,
                    [round(float(x), 3) for x in self.trainer_ref[0].class_weights])


class EpochSummary(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "eval_accuracy" in logs:
            logger.info("eval @ step %d: acc %.4f macro-recall %.4f", state.global_step,
                        logs["eval_accuracy"], logs["eval_macro_recall"])


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    hf_logging.set_verbosity_warning()
    set_seed(args.seed)
    torch.set_num_threads(1)

    docs, labels, t = synth_export(args.n_tickets, args.max_len, args.seed)
    cut = np.searchsorted(t, 1 - 7 / 90)  # last week of a 90-day export is validation
    train_ds = TicketDataset(docs[:cut], labels[:cut])
    val_ds = TicketDataset(docs[cut:], labels[cut:])
    logger.info("train %d / val %d tickets; train queue counts %s; val queue counts %s",
                len(train_ds), len(val_ds), np.bincount(labels[:cut]).tolist(),
                np.bincount(labels[cut:]).tolist())

    config = BertConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=4, intermediate_size=4 * args.hidden,
                        max_position_embeddings=args.max_len, num_labels=len(QUEUES),
                        id2label=dict(enumerate(QUEUES)),
                        label2id={q: i for i, q in enumerate(QUEUES)}, pad_token_id=PAD_ID)
    model = BertForSequenceClassification(config)

    targs = TrainingArguments(
        output_dir=args.output_dir, num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=128,
        learning_rate=args.lr, warmup_steps=100, weight_decay=0.01,
        lr_scheduler_type="linear", eval_strategy="epoch", save_strategy="epoch",
        save_total_limit=2, logging_steps=50, report_to=[], use_cpu=True,
        disable_tqdm=True, seed=args.seed, data_seed=args.seed, dataloader_num_workers=0)
    ref = [None]
    trainer = DRWTrainer(model=model, args=targs, train_dataset=train_ds, eval_dataset=val_ds,
                         data_collator=collate, compute_metrics=compute_metrics,
                         callbacks=[RecallReweighting(ref), EpochSummary()],
                         drw_start=args.drw_start)
    ref[0] = trainer
    result = trainer.train()
    logger.info("train done: %s", result.metrics)
    final = trainer.evaluate()
    logger.info("final eval: %s", final)
    trainer.save_model(os.path.join(args.output_dir, "final"))


if __name__ == "__main__":
    main()
