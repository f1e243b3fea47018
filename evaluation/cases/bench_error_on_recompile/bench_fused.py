"""Micro-benchmark harness: eager vs torch.compile for a few fused epilogues.

Each case is warmed up (compilation happens there), then the timed region runs
with recompilation forbidden so that a recompile can never pollute the numbers.

    python bench_fused.py [--iters N] [--csv out.csv]
"""
import argparse
import csv
import statistics
import sys
import time
from contextlib import contextmanager

import torch
import torch._dynamo
import torch.nn.functional as F

torch.set_num_threads(1)


@contextmanager
def no_recompiles():
    old = torch._dynamo.config.error_on_recompile
    torch._dynamo.config.error_on_recompile = True
    try:
        yield
    finally:
        torch._dynamo.config.error_on_recompile = old


def bias_gelu(x, b):
    return F.gelu(x + b, approximate="tanh")


def rmsnorm_scale(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def swiglu(x, w1, w2):
    a, g = (x @ w1).chunk(2, dim=-1)
    return (F.silu(g) * a) @ w2


def ema_update(p, q, decay):
    return p * decay + q * (1.0 - decay)


def make_cases(n, d):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    return {
        "bias_gelu": (bias_gelu, lambda i: (r(n, d), r(d))),
        "rmsnorm": (rmsnorm_scale, lambda i: (r(n, d), r(d), 1e-6)),
        "swiglu": (swiglu, lambda i: (r(n, d), r(d, 2 * d) / d ** 0.5, r(d, d) / d ** 0.5)),
        # decay warms up like in EMA-teacher training: min(0.999, (1+i)/(10+i))
        "ema_update": (ema_update, lambda i: (r(n, d), r(n, d), min(0.999, (1 + i) / (10 + i)))),
    }


def time_fn(fn, make_args, iters, warmup):
    warm_args = make_args(0)
    for _ in range(warmup):
        fn(*warm_args)
    samples = []
    with no_recompiles():
        for i in range(warmup, warmup + iters):
            args = make_args(i)
            t0 = time.perf_counter()
            fn(*args)
            samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6, min(samples) * 1e6


def check_close(name, eager_fn, compiled_fn, make_args):
    args = make_args(0)
    a, b = eager_fn(*args), compiled_fn(*args)
    if not torch.allclose(a, b, atol=1e-4, rtol=1e-4):
        raise AssertionError(f"{name}: compiled result differs, max abs err {(a - b).abs().max():.3g}")


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--csv", default=None)
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--no-compile", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cases = make_cases(args.n, args.d)
    rows = []
    for name, (fn, make_args) in cases.items():
        if args.only and name not in args.only:
            continue
        eager_med, eager_min = time_fn(fn, make_args, args.iters, args.warmup)
        row = {"case": name, "eager_us": round(eager_med, 1)}
        if not args.no_compile:
            torch._dynamo.reset()
            cfn = torch.compile(fn)
            check_close(name, fn, cfn, make_args)
            comp_med, comp_min = time_fn(cfn, make_args, args.iters, args.warmup)
            row.update(compiled_us=round(comp_med, 1), speedup=round(eager_med / comp_med, 2))
        rows.append(row)
        print(row, flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
            w.writeheader()
            w.writerows(rows)
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
