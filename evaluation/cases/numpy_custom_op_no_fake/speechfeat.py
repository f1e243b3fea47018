"""speechfeat: log-mel features with a numpy noise gate, and a keyword-spotting smoke test.

The gate is numpy code from the old pipeline; it is registered as a torch custom op so that
the featurizer can be torch.compile'd around it.
"""
import argparse
import logging
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger("speechfeat")
SR, N_FFT, HOP, N_MELS = 16000, 400, 160, 40


@torch.library.custom_op("speechfeat::noise_gate", mutates_args=())
def noise_gate(wave: torch.Tensor, floor_db: float) -> torch.Tensor:
    """Spectral gate: zero FFT bins below `floor_db` relative to each clip's peak bin."""
    x = wave.detach().cpu().numpy()
    spec = np.fft.rfft(x, axis=-1)
    mag_db = 20 * np.log10(np.abs(spec) + 1e-9)
    keep = mag_db > (mag_db.max(axis=-1, keepdims=True) + floor_db)
    out = np.fft.irfft(spec * keep, n=x.shape[-1], axis=-1).astype(np.float32)
    return torch.from_numpy(out).to(wave.device)


def mel_filterbank(n_mels=N_MELS, n_fft=N_FFT, sr=SR):
    hz2mel = lambda f: 2595 * math.log10(1 + f / 700)  # noqa: E731
    mels = torch.linspace(hz2mel(0), hz2mel(sr / 2), n_mels + 2)
    hz = 700 * (10 ** (mels / 2595) - 1)
    bins = torch.floor((n_fft + 1) * hz / sr).long()
    fb = torch.zeros(n_mels, n_fft // 2 + 1)
    for m in range(1, n_mels + 1):
        lo, c, hi = bins[m - 1].item(), bins[m].item(), bins[m + 1].item()
        for k in range(lo, c):
            fb[m - 1, k] = (k - lo) / max(c - lo, 1)
        for k in range(c, hi):
            fb[m - 1, k] = (hi - k) / max(hi - c, 1)
    return fb


class LogMel(nn.Module):
    def __init__(self, floor_db=-40.0):
        super().__init__()
        self.floor_db = floor_db
        self.register_buffer("fb", mel_filterbank())
        self.register_buffer("window", torch.hann_window(N_FFT))

    def forward(self, wave):
        wave = noise_gate(wave, self.floor_db)
        spec = torch.stft(wave, N_FFT, HOP, window=self.window, return_complex=True).abs() ** 2
        mel = torch.matmul(self.fb, spec)
        return torch.log(mel + 1e-6)


def synth_keywords(n, g):
    """Two 'keywords': rising vs falling chirps in noise, 0.5 s each."""
    t = torch.arange(SR // 2) / SR
    y = torch.randint(0, 2, (n,), generator=g)
    f0 = 300 + 200 * torch.rand(n, 1, generator=g)
    sweep = torch.where(y[:, None] == 1, 1200.0, -150.0)
    phase = 2 * math.pi * (f0 * t + 0.5 * sweep * t ** 2)
    return torch.sin(phase) + 0.3 * torch.randn(n, t.numel(), generator=g), y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    feat = LogMel()
    featurize = feat if args.no_compile else torch.compile(feat)
    wave, y = synth_keywords(args.n, g)
    t0 = time.perf_counter()
    X = torch.cat([featurize(wave[i:i + 64]) for i in range(0, args.n, 64)])
    log.info("features %s in %.2fs", tuple(X.shape), time.perf_counter() - t0)
    X = (X - X.mean()) / X.std()
    clf = nn.Sequential(nn.Conv1d(N_MELS, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 2))
    opt = torch.optim.Adam(clf.parameters(), lr=1e-2)
    for step in range(args.steps):
        loss = F.cross_entropy(clf(X), y)
        opt.zero_grad(); loss.backward(); opt.step()
    acc = (clf(X).argmax(-1) == y).float().mean().item()
    log.info("train loss %.4f acc %.3f", loss.item(), acc)


if __name__ == "__main__":
    main()
