# BPR-MF on an implicit-feedback log, temporal split, full-ranking eval.
# usage: python bpr_mf.py [--dim 96] [--epochs 36] [--bs 1024]
# data: synthetic stand-in for the clicks dump (users x items x time), same schema:
#   item ids are assigned in order of release, t in [0, 1] is normalised event time.
import argparse, os, time, json, math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument('--users', type=int, default=6000)
p.add_argument('--items', type=int, default=4000)
p.add_argument('--dim', type=int, default=96)
p.add_argument('--epochs', type=int, default=36)
p.add_argument('--bs', type=int, default=1024)
p.add_argument('--lr', type=float, default=2e-3)
p.add_argument('--l2', type=float, default=1e-5)
p.add_argument('--cut', type=float, default=0.9, help='train on t < cut, test on t >= cut')
p.add_argument('--val_frac', type=float, default=0.03)
p.add_argument('--eval_every', type=int, default=6)
p.add_argument('--k', type=int, default=20)
p.add_argument('--seed', type=int, default=0)
p.add_argument('--out', default='runs/bpr')
args = p.parse_args()

torch.manual_seed(args.seed); np.random.seed(args.seed)
torch.set_num_threads(1)  # tiny model, threads only hurt here
os.makedirs(args.out, exist_ok=True)
rng = np.random.default_rng(args.seed)


def synth_log(n_users, n_items, d=16):
    """(user, item, t) rows. Items are released over time (id order == release order)."""
    Zu = rng.normal(size=(n_users, d)).astype(np.float32)
    Zi = rng.normal(size=(n_items, d)).astype(np.float32)
    pop = rng.zipf(1.6, size=n_items).clip(max=200).astype(np.float32)
    release = np.linspace(0.0, 0.97, n_items)
    rows = []
    for u in range(n_users):
        logit = Zu[u] @ Zi.T / math.sqrt(d) * 2.0 + np.log(pop)
        pr = np.exp(logit - logit.max()); pr /= pr.sum()
        k = int(rng.integers(40, 160))
        its = rng.choice(n_items, size=k, replace=False, p=pr)
        t = np.minimum(release[its] + rng.exponential(0.08, size=k), 1.0)
        rows.append(np.stack([np.full(k, u), its, t], 1))
    log = np.concatenate(rows)
    return log[np.argsort(log[:, 2], kind='stable')]


t0 = time.time()
log = synth_log(args.users, args.items)
fit = log[log[:, 2] < args.cut]
test = log[log[:, 2] >= args.cut]
n_users = int(log[:, 0].max()) + 1
n_items = int(fit[:, 1].max()) + 1          # catalogue = what we can train embeddings for
test = test[np.isin(test[:, 0], np.unique(fit[:, 0]))]   # drop cold-start users
perm = rng.permutation(len(fit))
n_val = int(len(fit) * args.val_frac)
val, train = fit[perm[:n_val]], fit[perm[n_val:]]
print(f'log {len(log)}  train {len(train)}  val {len(val)}  test {len(test)}  '
      f'users {n_users}  items {n_items}  ({time.time() - t0:.1f}s)')

tr_u = torch.as_tensor(train[:, 0], dtype=torch.long)
tr_i = torch.as_tensor(train[:, 1], dtype=torch.long)

# per-user seen items, for masking during ranking
seen = [[] for _ in range(n_users)]
for u, i in zip(train[:, 0].astype(int), train[:, 1].astype(int)):
    seen[u].append(i)


class MF(nn.Module):
    def __init__(self, nu, ni, d):
        super().__init__()
        self.U = nn.Embedding(nu, d); self.V = nn.Embedding(ni, d); self.b = nn.Embedding(ni, 1)
        nn.init.normal_(self.U.weight, std=0.05); nn.init.normal_(self.V.weight, std=0.05)
        nn.init.zeros_(self.b.weight)

    def forward(self, u, i):
        return (self.U(u) * self.V(i)).sum(-1) + self.b(i).squeeze(-1)

    def full_scores(self, u):
        return self.U(u) @ self.V.weight.T + self.b.weight.T


model = MF(n_users, n_items, args.dim)
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
g = torch.Generator().manual_seed(args.seed)


def bpr_epoch():
    model.train()
    idx = torch.randperm(len(tr_u), generator=g)
    tot, n = 0.0, 0
    for s in range(0, len(idx), args.bs):
        b = idx[s:s + args.bs]
        u, i = tr_u[b], tr_i[b]
        j = torch.randint(0, n_items, (len(b),), generator=g)   # uniform negatives
        x = model(u, i) - model(u, j)
        reg = model.U(u).pow(2).sum() + model.V(i).pow(2).sum() + model.V(j).pow(2).sum()
        loss = -F.logsigmoid(x).mean() + args.l2 * reg / len(b)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        tot += loss.item() * len(b); n += len(b)
    return tot / n


pop_counts = torch.bincount(tr_i, minlength=n_items).float()


def pop_scores(u):
    return pop_counts.expand(len(u), -1).clone()


@torch.no_grad()
def evaluate(rows, k=20, bs=512, scorer=None):
    """Leave-rows-out full ranking: recall@k, ndcg@k, mrr over (user, item) pairs."""
    model.eval()
    scorer = scorer or model.full_scores
    u_all = torch.as_tensor(rows[:, 0], dtype=torch.long)
    i_all = torch.as_tensor(rows[:, 1], dtype=torch.long)
    rec, ndcg, mrr = [], [], []
    for s in range(0, len(u_all), bs):
        u, i = u_all[s:s + bs], i_all[s:s + bs]
        sc = scorer(u)
        for r, uu in enumerate(u.tolist()):
            sc[r, seen[uu]] = -1e9
        pos = sc.gather(1, i[:, None])                 # score of the held-out item
        rank = (sc > pos).sum(1).float()               # 0-based
        hit = (rank < k).float()
        rec.append(hit); ndcg.append(hit / torch.log2(rank + 2)); mrr.append(1.0 / (rank + 1))
    return {f'recall@{k}': torch.cat(rec).mean().item(), f'ndcg@{k}': torch.cat(ndcg).mean().item(),
            'mrr': torch.cat(mrr).mean().item()}


base = evaluate(val, args.k, scorer=pop_scores)
print('popularity baseline (val)', json.dumps(base))
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=12, gamma=0.5)
hist, best, bad = [], -1.0, 0
for ep in range(1, args.epochs + 1):
    t1 = time.time()
    l = bpr_epoch(); sched.step()
    line = {'epoch': ep, 'loss': round(l, 5), 'lr': sched.get_last_lr()[0],
            'sec': round(time.time() - t1, 2)}
    if ep % args.eval_every == 0 or ep == args.epochs:
        line.update(evaluate(val, args.k))
        if line[f'recall@{args.k}'] > best:
            best = line[f'recall@{args.k}']
            torch.save({'model': model.state_dict(), 'epoch': ep, 'args': vars(args)},
                       os.path.join(args.out, 'best.pt'))
            bad = 0
        else:
            bad += 1   # patience is only reported, we always run the full schedule
        line['since_best'] = bad
    hist.append(line)
    print(json.dumps(line), flush=True)

json.dump(hist, open(os.path.join(args.out, 'history.json'), 'w'), indent=1)
print(f'train done in {time.time() - t0:.0f}s, best val recall@{args.k} {best:.4f}')

model.load_state_dict(torch.load(os.path.join(args.out, 'best.pt'))['model'])
res = {'bpr': evaluate(test, args.k)}
print('TEST bpr', json.dumps(res['bpr']))
res['pop'] = evaluate(test, args.k, scorer=pop_scores)
print('TEST pop', json.dumps(res['pop']))
lift = {m: res['bpr'][m] / max(res['pop'][m], 1e-12) for m in res['bpr']}
print('lift over popularity', {m: round(v, 2) for m, v in lift.items()})
json.dump(res, open(os.path.join(args.out, 'test.json'), 'w'), indent=1)
