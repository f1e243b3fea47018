# coding=utf-8
"""TinyBert: a minimal encoder in the style of a HF `modeling_*.py` file, with a
config class, a pretrained-model base, a sequence-classification head and a
quick self-test that runs the compiled model on a padded batch."""
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyBertConfig:
    model_type = "tinybert"

    def __init__(self, vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=128, max_position_embeddings=128,
                 hidden_dropout_prob=0.0, layer_norm_eps=1e-12, num_labels=3,
                 torch_compile=True, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_dropout_prob = hidden_dropout_prob
        self.layer_norm_eps = layer_norm_eps
        self.num_labels = num_labels
        self.torch_compile = torch_compile
        for k, v in kwargs.items():
            setattr(self, k, v)


@dataclass
class SequenceClassifierOutput:
    loss: Optional[torch.Tensor] = None
    logits: torch.Tensor = None
    hidden_states: Optional[Tuple[torch.Tensor, ...]] = None


class TinyBertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        h = self.word_embeddings(input_ids) + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(h))


class TinyBertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def _merge_heads(self, x):
        # (B, H, T, D) -> (B, T, H*D). view() is free when the layout allows it;
        # fall back to reshape (a copy) when it does not.
        B, H, T, D = x.shape
        x = x.transpose(1, 2)
        try:
            return x.view(B, T, H * D)
        except RuntimeError:
            return x.reshape(B, T, H * D)

    def forward(self, hidden_states, attention_mask=None):
        B, T, C = hidden_states.shape
        q, k, v = self.qkv(hidden_states).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            scores = scores + (1.0 - attention_mask[:, None, None, :].to(scores.dtype)) * -1e4
        probs = scores.softmax(-1)
        return self.out(self._merge_heads(probs @ v))


class TinyBertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = TinyBertSelfAttention(config)
        self.ln1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = nn.Sequential(nn.Linear(config.hidden_size, config.intermediate_size), nn.GELU(),
                                 nn.Linear(config.intermediate_size, config.hidden_size))
        self.ln2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, h, attention_mask=None):
        h = self.ln1(h + self.attention(h, attention_mask))
        return self.ln2(h + self.ffn(h))


class TinyBertPreTrainedModel(nn.Module):
    config_class = TinyBertConfig
    base_model_prefix = "tinybert"

    def __init__(self, config):
        super().__init__()
        self.config = config

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def post_init(self):
        self.apply(self._init_weights)


class TinyBertForSequenceClassification(TinyBertPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embeddings = TinyBertEmbeddings(config)
        self.layers = nn.ModuleList([TinyBertLayer(config) for _ in range(config.num_hidden_layers)])
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, labels=None, output_hidden_states=False):
        h = self.embeddings(input_ids)
        all_h = (h,) if output_hidden_states else None
        for layer in self.layers:
            h = layer(h, attention_mask)
            if output_hidden_states:
                all_h = all_h + (h,)
        logits = self.classifier(h[:, 0])
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=all_h)


def _fake_batch(config, batch_size=4, seq_len=16):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=g)
    lens = torch.randint(seq_len // 2, seq_len + 1, (batch_size,), generator=g)
    mask = (torch.arange(seq_len)[None, :] < lens[:, None]).long()
    ids = ids.masked_fill(mask == 0, 0)
    labels = torch.randint(0, config.num_labels, (batch_size,), generator=g)
    return ids, mask, labels


if __name__ == "__main__":
    torch.manual_seed(0)
    config = TinyBertConfig()
    model = TinyBertForSequenceClassification(config)
    if config.torch_compile:
        model = torch.compile(model, fullgraph=True)
    ids, mask, labels = _fake_batch(config)
    out = model(ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    print("logits", tuple(out.logits.shape), "loss", round(out.loss.item(), 4))
