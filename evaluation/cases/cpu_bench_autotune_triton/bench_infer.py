"""Latency benchmark: eager vs torch.compile for a small MLP-Mixer at batch 1..32.

    python bench_infer.py [--preset tuned] [--batches 1 8 32] [--iters 50]

Writes bench_results.json in the working directory.
"""
import os

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(".inductor-cache"))

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

# Presets shared with the GPU benchmark (same numbers in the report).
PRESETS = {
    "default": {},
    "tuned": {
        "max_autotune": True,
        "max_autotune_gemm_backends": "TRITON",
        "epilogue_fusion": True,
        "coordinate_descent_tuning": True,
    },
}


class MixerBlock(nn.Module):
    def __init__(self, tokens, dim, hidden=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, tokens * hidden), nn.GELU(), nn.Linear(tokens * hidden, tokens))
        self.chan_mlp = nn.Sequential(nn.Linear(dim, dim * hidden), nn.GELU(), nn.Linear(dim * hidden, dim))

    def forward(self, x):
        x = x + self.token_mlp(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.chan_mlp(self.ln2(x))


class Mixer(nn.Module):
    def __init__(self, img=32, patch=4, dim=96, depth=4, n_classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, patch, stride=patch)
        tokens = (img // patch) ** 2
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim) for _ in range(depth)])
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.blocks(x).mean(1))


def time_fn(fn, x, iters, warmup=5):
    for _ in range(warmup):
        fn(x)
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(x)
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return {"p50_ms": statistics.median(ts), "p90_ms": ts[int(0.9 * len(ts)) - 1], "mean_ms": statistics.fmean(ts)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tuned", choices=sorted(PRESETS))
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = Mixer().eval()
    compiled = torch.compile(model, options=PRESETS[args.preset])
    env = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "threads": torch.get_num_threads(), "preset": args.preset}
    print("env:", json.dumps(env))
    results = []
    with torch.inference_mode():
        for bs in args.batches:
            x = torch.randn(bs, 3, 32, 32)
            ref = model(x)
            eager = time_fn(model, x, args.iters)
            comp = time_fn(compiled, x, args.iters)
            err = (compiled(x) - ref).abs().max().item()
            row = {"batch": bs, "eager": eager, "compiled": comp, "max_abs_err": err,
                   "speedup": eager["p50_ms"] / comp["p50_ms"]}
            print(f"bs={bs:3d}  eager {eager['p50_ms']:7.3f} ms  compiled {comp['p50_ms']:7.3f} ms  "
                  f"x{row['speedup']:.2f}  err {err:.1e}")
            results.append(row)
    with open("bench_results.json", "w") as f:
        json.dump({"env": env, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
