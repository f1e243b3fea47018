# coding=utf-8
"""TinyFormer: a small encoder for sequence classification, written in the style of a
`transformers` modeling file (config class, PreTrainedModel base, ModelOutput dataclass).
Fine-tunes on a synthetic "does the sequence contain token 7 twice" task."""
import functools
import logging
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

logger = logging.getLogger(__name__)


@functools.lru_cache(None)
def _warning_once(self, *args, **kwargs):
    self.warning(*args, **kwargs)


logging.Logger.warning_once = _warning_once


class TinyConfig:
    model_type = "tiny"

    def __init__(self, vocab_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 max_position_embeddings=64, num_labels=2, hidden_dropout_prob=0.1, use_cache=True,
                 initializer_range=0.02, **kwargs):
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.max_position_embeddings, self.num_labels = max_position_embeddings, num_labels
        self.hidden_dropout_prob, self.use_cache = hidden_dropout_prob, use_cache
        self.initializer_range = initializer_range
        for k, v in kwargs.items():
            setattr(self, k, v)

    def to_dict(self):
        return dict(self.__dict__, model_type=self.model_type)


@dataclass
class SequenceClassifierOutput:
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple] = None


class TinyPreTrainedModel(nn.Module):
    config_class = TinyConfig

    def __init__(self, config):
        super().__init__()
        self.config = config

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def post_init(self):
        self.apply(self._init_weights)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


class TinyLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attn = nn.MultiheadAttention(config.hidden_size, config.num_attention_heads, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(config.hidden_size), nn.LayerNorm(config.hidden_size)
        self.ffn = nn.Sequential(nn.Linear(config.hidden_size, 4 * config.hidden_size), nn.GELU(),
                                 nn.Linear(4 * config.hidden_size, config.hidden_size))
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, key_padding_mask=None):
        h = self.ln1(hidden_states)
        a, _ = self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False)
        hidden_states = hidden_states + self.dropout(a)
        return hidden_states + self.dropout(self.ffn(self.ln2(hidden_states)))


class TinyForSequenceClassification(TinyPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.layers = nn.ModuleList(TinyLayer(config) for _ in range(config.num_hidden_layers))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, labels=None, use_cache=None):
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if use_cache and self.training:
            logger.warning_once("`use_cache=True` is incompatible with training. Setting `use_cache=False`.")
            use_cache = False
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.embeddings(input_ids) + self.position_embeddings(pos)[None]
        pad = None if attention_mask is None else attention_mask == 0
        for layer in self.layers:
            h = layer(h, key_padding_mask=pad)
        logits = self.classifier(h.mean(1))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def synthetic_batch(g, bs=32, seq=24, vocab=32):
    ids = torch.randint(1, vocab, (bs, seq), generator=g)
    labels = ((ids == 7).sum(1) >= 2).long()
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    config = TinyConfig()
    model = TinyForSequenceClassification(config)
    logger.info("config %s, %.2fM parameters", config.to_dict(), model.num_parameters() / 1e6)
    model = torch.compile(model, fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    model.train()
    for step in range(60):
        batch = synthetic_batch(g)
        out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); sched.step(); opt.zero_grad()
        if step % 20 == 0:
            acc = (out.logits.argmax(-1) == batch["labels"]).float().mean().item()
            logger.info("step %d loss %.4f acc %.3f lr %.2e", step, out.loss.item(), acc, sched.get_last_lr()[0])
