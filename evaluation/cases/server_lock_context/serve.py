"""Tiny batched inference server for a text-scoring model.

Requests come in on a queue, a batcher thread groups them, and the worker runs
the compiled predict step. The model is shared with a hot-reload thread, so the
predict step holds the model lock while it reads the weights."""
import json
import os
import queue
import threading
import time
from collections import deque

import torch
import torch.nn as nn

MAX_BATCH = int(os.environ.get("SERVE_MAX_BATCH", "8"))
MAX_WAIT_MS = float(os.environ.get("SERVE_MAX_WAIT_MS", "5"))
VOCAB = 512
SEQ = 24
COMPILE = os.environ.get("SERVE_COMPILE", "1") == "1"

MODEL_LOCK = threading.Lock()


class Scorer(nn.Module):
    def __init__(self, vocab=VOCAB, dim=48, n_out=4):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, n_out))

    def forward(self, ids, offsets):
        return self.mlp(self.emb(ids, offsets))


MODEL = Scorer().eval()


def predict(ids, offsets):
    with MODEL_LOCK:
        logits = MODEL(ids, offsets)
    probs = logits.softmax(-1)
    conf, label = probs.max(-1)
    return label, conf


if COMPILE:
    predict = torch.compile(predict, fullgraph=True, dynamic=True)


class Request:
    __slots__ = ("rid", "tokens", "t_arrive", "result", "done")

    def __init__(self, rid, tokens):
        self.rid = rid
        self.tokens = tokens
        self.t_arrive = time.perf_counter()
        self.result = None
        self.done = threading.Event()


def tokenize(text):
    return [hash(w) % (VOCAB - 1) + 1 for w in text.lower().split()][:SEQ] or [0]


def collate(reqs):
    flat, offsets = [], []
    for r in reqs:
        offsets.append(len(flat))
        flat.extend(r.tokens)
    return torch.tensor(flat, dtype=torch.long), torch.tensor(offsets, dtype=torch.long)


def batcher(inbox, stop, stats):
    pending = deque()
    while not stop.is_set() or pending or not inbox.empty():
        try:
            pending.append(inbox.get(timeout=MAX_WAIT_MS / 1000))
        except queue.Empty:
            pass
        if not pending:
            continue
        oldest = (time.perf_counter() - pending[0].t_arrive) * 1000
        if len(pending) >= MAX_BATCH or oldest >= MAX_WAIT_MS or stop.is_set():
            batch = [pending.popleft() for _ in range(min(MAX_BATCH, len(pending)))]
            run_batch(batch, stats)


def run_batch(batch, stats):
    ids, offsets = collate(batch)
    t0 = time.perf_counter()
    with torch.inference_mode():
        label, conf = predict(ids, offsets)
    dt = time.perf_counter() - t0
    stats["batches"] += 1
    stats["latency"].append(dt)
    for r, l, c in zip(batch, label.tolist(), conf.tolist()):
        r.result = {"id": r.rid, "label": l, "confidence": round(c, 4)}
        r.done.set()


def hot_reload(stop, path="scorer.pt"):
    while not stop.is_set():
        if os.path.exists(path):
            sd = torch.load(path, map_location="cpu")
            with MODEL_LOCK:
                MODEL.load_state_dict(sd)
        stop.wait(0.5)


def main():
    torch.manual_seed(0)
    inbox, stop = queue.Queue(), threading.Event()
    stats = {"batches": 0, "latency": []}
    errors = []

    def guarded_batcher():
        try:
            batcher(inbox, stop, stats)
        except BaseException as e:  # surface worker errors in the main thread
            errors.append(e)
            stop.set()

    worker = threading.Thread(target=guarded_batcher, daemon=True)
    reloader = threading.Thread(target=hot_reload, args=(stop,), daemon=True)
    worker.start()
    reloader.start()

    corpus = ["the service was great", "terrible latency again", "ok I guess",
              "would buy again", "refund please", "five stars", "meh"]
    reqs = []
    for i in range(40):
        r = Request(i, tokenize(corpus[i % len(corpus)] + f" item{i}"))
        inbox.put(r)
        reqs.append(r)
        time.sleep(0.001)
    for r in reqs:
        while not r.done.wait(0.05):
            if errors:
                raise errors[0]
    stop.set()
    worker.join(timeout=2)
    lat = sorted(stats["latency"])
    print(json.dumps({"served": len(reqs), "batches": stats["batches"],
                      "p50_ms": round(1000 * lat[len(lat) // 2], 2)}))
    print(reqs[0].result)


if __name__ == "__main__":
    main()
