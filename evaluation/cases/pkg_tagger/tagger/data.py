import random
from collections import Counter

import torch
from torch.utils.data import DataLoader, Dataset

from .models import MAX_LEN, PAD_ID

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
TAG2ID = {t: i for i, t in enumerate(TAGS)}

_FIRST = ["anna", "boris", "chen", "dara", "eli", "fatima", "gus"]
_LAST = ["smith", "ivanova", "li", "okafor", "novak"]
_CITY = [["paris"], ["new", "york"], ["lagos"], ["sao", "paulo"], ["oslo"]]
_ORG = [["acme"], ["globex", "corp"], ["initech"], ["umbrella", "inc"]]
_VERB = ["visited", "joined", "left", "called", "met", "moved", "to"]
_FILL = ["yesterday", "today", "the", "office", "in", "with", "for", "a", "meeting", "again"]


def synthetic_corpus(n, seed=0):
    rng = random.Random(seed)
    sents = []
    for _ in range(n):
        toks, tags = [], []

        def add(words, label):
            for j, w in enumerate(words):
                toks.append(w)
                tags.append("O" if label == "O" else ("B-" if j == 0 else "I-") + label)

        add([rng.choice(_FIRST)] + ([rng.choice(_LAST)] if rng.random() < 0.6 else []), "PER")
        add([rng.choice(_VERB)], "O")
        add(rng.choice(_ORG) if rng.random() < 0.5 else rng.choice(_CITY),
            "ORG" if rng.random() < 0.5 else "LOC")
        for _ in range(rng.randint(0, 6)):
            add([rng.choice(_FILL)], "O")
        sents.append((toks, tags))
    return sents


class Vocab:
    def __init__(self, sentences, min_count=1):
        c = Counter(w for toks, _ in sentences for w in toks)
        self.itos = ["<pad>", "<unk>"] + sorted(w for w, n in c.items() if n >= min_count)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        assert self.stoi["<pad>"] == PAD_ID

    def __len__(self):
        return len(self.itos)

    def encode(self, toks):
        return [self.stoi.get(w, 1) for w in toks]


class TaggingDataset(Dataset):
    def __init__(self, sentences, vocab):
        self.examples = [(vocab.encode(t), [TAG2ID[x] for x in g]) for t, g in sentences]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def pad_mask_from_lengths(lengths, max_len=MAX_LEN):
    """True at padded positions."""
    ar = torch.arange(max_len)[None, :]
    return ar >= torch.as_tensor(lengths)[:, None]


def collate(batch):
    lengths = [len(toks) for toks, _ in batch]
    T = max(lengths)
    tokens = torch.full((len(batch), T), PAD_ID, dtype=torch.long)
    tags = torch.full((len(batch), T), -100, dtype=torch.long)
    for i, (toks, tg) in enumerate(batch):
        tokens[i, : len(toks)] = torch.tensor(toks)
        tags[i, : len(tg)] = torch.tensor(tg)
    return tokens, pad_mask_from_lengths(lengths), tags


def make_loader(dataset, batch_size, shuffle, seed=0):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collate, generator=g)
