"""Teach a tiny GPT-2 to add two 3-digit numbers, with the HF Trainer.

Character-level: every example is "<bos>123+456=579<eos>", padded to a fixed length.
Loss is only on the answer digits (prompt positions are -100).

    python train_adder.py --epochs 2 --output_dir outputs/adder
"""
import argparse
import logging
import os
import random

import numpy as np
import torch
from torch.utils.data import Dataset
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

logger = logging.getLogger(__name__)

DIGITS = "0123456789"
CHARS = DIGITS + "+="
VOCAB_SIZE = len(CHARS)


class CharTokenizer:
    """Minimal char tokenizer; specials go after the characters."""

    def __init__(self, chars, specials=("<pad>", "<bos>", "<eos>")):
        self.itos = list(chars) + list(specials)
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.pad_token_id = self.stoi["<pad>"]
        self.bos_token_id = self.stoi["<bos>"]
        self.eos_token_id = self.stoi["<eos>"]

    def __len__(self):
        return len(self.itos)

    def encode(self, s, add_special_tokens=True):
        ids = [self.stoi[c] for c in s]
        return [self.bos_token_id] + ids + [self.eos_token_id] if add_special_tokens else ids

    def decode(self, ids):
        return "".join(self.itos[i] for i in ids if i < len(CHARS))


class AdditionDataset(Dataset):
    def __init__(self, n, tok, max_len, seed, n_digits=3):
        rng = random.Random(seed)
        self.examples = []
        hi = 10 ** n_digits - 1
        for _ in range(n):
            a, b = rng.randint(0, hi), rng.randint(0, hi)
            prompt, answer = f"{a}+{b}=", f"{a + b}"
            ids = tok.encode(prompt + answer)
            n_prompt = 1 + len(prompt)  # bos + prompt chars
            labels = [-100] * n_prompt + ids[n_prompt:]
            pad = max_len - len(ids)
            self.examples.append({
                "input_ids": ids + [tok.pad_token_id] * pad,
                "attention_mask": [1] * len(ids) + [0] * pad,
                "labels": labels + [-100] * pad,
            })

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return {k: torch.tensor(v) for k, v in self.examples[i].items()}


def exact_match(eval_pred):
    logits, labels = eval_pred
    preds = logits.argmax(-1)
    # causal shift: the prediction at t is for token t+1
    preds, labels = preds[:, :-1], labels[:, 1:]
    mask = labels != -100
    per_seq = ((preds == labels) | ~mask).all(axis=1)
    tok_acc = (preds[mask] == labels[mask]).mean()
    return {"exact_match": float(per_seq.mean()), "token_acc": float(tok_acc)}


class PrintLossCallback(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            logger.info("step %d: loss %.4f lr %.2e", state.global_step, logs["loss"], logs.get("learning_rate", 0))


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output_dir", default="outputs/adder")
    ap.add_argument("--n_train", type=int, default=4000)
    ap.add_argument("--n_eval", type=int, default=400)
    ap.add_argument("--epochs", type=float, default=2)
    ap.add_argument("--batch_size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--n_layer", type=int, default=2)
    ap.add_argument("--n_embd", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
    set_seed(args.seed)

    tok = CharTokenizer(CHARS)
    max_len = 1 + 3 + 1 + 3 + 1 + 4 + 1  # bos a + b = sum eos
    train_ds = AdditionDataset(args.n_train, tok, max_len, seed=args.seed)
    eval_ds = AdditionDataset(args.n_eval, tok, max_len, seed=args.seed + 1)
    logger.info("train %d / eval %d examples, max_len %d, tokenizer size %d", len(train_ds), len(eval_ds),
                max_len, len(tok))

    config = GPT2Config(
        vocab_size=VOCAB_SIZE,
        n_positions=32,
        n_embd=args.n_embd,
        n_layer=args.n_layer,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = GPT2LMHeadModel(config)
    logger.info("model: %.1fK parameters", model.num_parameters() / 1e3)

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=128,
        learning_rate=args.lr,
        weight_decay=0.01,
        warmup_steps=20,
        lr_scheduler_type="cosine",
        logging_steps=20,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=1,
        load_best_model_at_end=True,
        metric_for_best_model="exact_match",
        report_to=[],
        use_cpu=True,
        seed=args.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        compute_metrics=exact_match,
        callbacks=[PrintLossCallback()],
    )
    trainer.train()
    metrics = trainer.evaluate()
    logger.info("final eval: %s", metrics)
    trainer.save_model(os.path.join(args.output_dir, "final"))

    # a few greedy samples
    model.eval()
    for a, b in [(123, 456), (999, 1), (500, 500)]:
        ids = torch.tensor([tok.encode(f"{a}+{b}=")[:-1]])
        out = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
        print(f"{a}+{b}= -> {tok.decode(out[0, ids.shape[1]:].tolist())}")


if __name__ == "__main__":
    main()
