"""docpool: tiny utilities for document embeddings built from sentence embeddings.

Library part (hash tokenizer, sentence encoder, compiled attentive pooling) plus a small
command-line demo that embeds a synthetic corpus and reports retrieval recall@k.
"""
import argparse
import functools
import hashlib
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["HashTokenizer", "SentenceEncoder", "attentive_pool", "embed_corpus"]

# Strict mode: a helper that silently falls back to eager is a performance bug.
torch._dynamo.config.fail_on_recompile_limit_hit = True
_compile = functools.partial(torch.compile, backend="aot_eager", dynamic=True)


class HashTokenizer:
    def __init__(self, n_buckets: int = 4096):
        self.n_buckets = n_buckets

    @functools.lru_cache(maxsize=65536)
    def _bucket(self, word: str) -> int:
        return int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % self.n_buckets

    def __call__(self, sentence: str) -> torch.Tensor:
        return torch.tensor([self._bucket(w) for w in sentence.lower().split()] or [0])


class SentenceEncoder(nn.Module):
    def __init__(self, n_buckets: int = 4096, dim: int = 48):
        super().__init__()
        self.bag = nn.EmbeddingBag(n_buckets, dim, mode="mean")
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(self.bag(ids[None])))[0]


@_compile
def attentive_pool(sent_vecs: list, query: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """Pool a document's sentence vectors with attention against a learned query."""
    s = torch.stack(sent_vecs)  # (n_sent, dim)
    w = torch.softmax(s @ query / temperature, dim=0)
    return F.normalize((w[:, None] * s).sum(0), dim=0)


def embed_corpus(docs, tok, enc, query):
    out = []
    for doc in docs:
        vecs = [enc(tok(s)) for s in doc]
        out.append(attentive_pool(vecs, query))
    return torch.stack(out)


# ---------------------------------------------------------------- demo / benchmark
TOPICS = {
    "sports": "match goal team score coach league season player win",
    "finance": "market stock bond rate bank price inflation fund yield",
    "weather": "rain storm wind forecast cloud sunny cold front pressure",
    "cooking": "oven recipe salt flour butter simmer bake sauce garlic",
}


def synth_corpus(n_docs: int, g: torch.Generator):
    names, docs, labels = list(TOPICS), [], []
    for _ in range(n_docs):
        t = int(torch.randint(len(names), (1,), generator=g))
        words = TOPICS[names[t]].split()
        n_sent = int(torch.randint(2, 14, (1,), generator=g))
        doc = []
        for _ in range(n_sent):
            k = int(torch.randint(4, 9, (1,), generator=g))
            doc.append(" ".join(words[int(i)] for i in torch.randint(len(words), (k,), generator=g)))
        docs.append(doc)
        labels.append(t)
    return docs, torch.tensor(labels)


def recall_at_k(emb, labels, k=5):
    sim = emb @ emb.T
    sim.fill_diagonal_(-1)
    top = sim.topk(k, dim=1).indices
    return (labels[top] == labels[:, None]).float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    docs, labels = synth_corpus(args.docs, g)
    tok, enc = HashTokenizer(), SentenceEncoder()
    query = torch.randn(48)
    t0 = time.perf_counter()
    with torch.no_grad():
        emb = embed_corpus(docs, tok, enc, query)
    print(f"embedded {len(docs)} docs in {time.perf_counter() - t0:.2f}s")
    print(f"recall@{args.k}: {recall_at_k(emb, labels, args.k):.3f}")


if __name__ == "__main__":
    main()
