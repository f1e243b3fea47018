"""Federated averaging simulation: every client is an OS process with its own local
data (one building's sensor log), trains locally for a few steps, then the clients
average their weights with all_reduce (FedAvg with equal weights).

    python fedavg_sim.py            # 2 clients
    python fedavg_sim.py 3          # 3 clients

Launcher: plain multiprocessing, one Process per client.
"""
import csv
import io
import multiprocessing
import os
import random
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

ROUNDS = 5
LOCAL_STEPS = 10
BATCH = 32
LR = 0.05
SENSORS = ["temp", "humidity", "co2", "light", "pir", "noise", "pressure", "voc",
           "pm25", "window", "door", "hvac"]
ACTIVITIES = ["empty", "meeting", "desk_work", "cleaning"]


def sensor_log(client, n_rows=600, seed=5):
    """The CSV export of one building's occupancy sensors. Building 1 got the newer
    gateway firmware, which also exports the battery level."""
    rng = random.Random(seed + client)
    cols = ["timestamp"] + SENSORS + (["battery_pct"] if client == 1 else []) + ["activity"]
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(cols)
    for i in range(n_rows):
        act = rng.randrange(len(ACTIVITIES))
        row = [1_700_000_000 + 60 * i]
        row += [round(rng.gauss(act * (j % 3) * 0.5, 1.0), 3) for j in range(len(SENSORS))]
        if client == 1:
            row.append(rng.randint(20, 100))
        row.append(ACTIVITIES[act])
        w.writerow(row)
    return out.getvalue()


def load_client_data(client):
    reader = csv.DictReader(io.StringIO(sensor_log(client)))
    feature_cols = [c for c in reader.fieldnames if c not in ("timestamp", "activity")]
    xs, ys = [], []
    for r in reader:
        xs.append([float(r[c]) for c in feature_cols])
        ys.append(ACTIVITIES.index(r["activity"]))
    x = torch.tensor(xs)
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    return x, torch.tensor(ys)


def make_model():
    torch.manual_seed(0)  # the same initial global model on every client
    return nn.Sequential(nn.Linear(len(SENSORS), 32), nn.ReLU(), nn.Linear(32, len(ACTIVITIES)))


def fed_average(model, world):
    for p in model.parameters():
        dist.all_reduce(p.data, op=dist.ReduceOp.SUM)
        p.data /= world


def local_train(model, x, y, steps, gen):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    total = 0.0
    for _ in range(steps):
        idx = torch.randint(0, len(x), (BATCH,), generator=gen)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
    return total / steps


def client_main(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x, y = load_client_data(rank)
    model = make_model()
    gen = torch.Generator().manual_seed(100 + rank)
    for rnd in range(ROUNDS):
        loss = local_train(model, x, y, LOCAL_STEPS, gen)
        fed_average(model, world)
        with torch.no_grad():
            acc = (model(x).argmax(1) == y).float().mean().item()
        print(f"round {rnd} client {rank}: local loss {loss:.3f}, acc after averaging {acc:.3f}", flush=True)
    dist.destroy_process_group()


def main(argv):
    world = int(argv[1]) if len(argv) > 1 else 2
    port = 29563
    ctx = multiprocessing.get_context("spawn")
    procs = []
    t0 = time.time()
    for rank in range(world):
        p = ctx.Process(target=client_main, args=(rank, world, port), name=f"client-{rank}")
        p.start()
        procs.append(p)
    for p in procs:
        p.join()
    for p in procs:
        if p.exitcode != 0:
            raise RuntimeError(f"{p.name} failed with exit code {p.exitcode}")
    print(f"federated training finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main(sys.argv)
