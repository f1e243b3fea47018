# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Spectral-mask speech enhancement (toy)
#
# Synthetic voiced "speech" (harmonic stacks with vibrato and a slow formant
# envelope) mixed with coloured noise at 0-10 dB SNR. A small GRU predicts an
# ideal-ratio mask on the log-magnitude STFT; we resynthesise with the noisy phase.

# %%
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)

SR = 16000
N_FFT = 512
WIN = 400          # 25 ms
HOP = 160          # 10 ms
SECONDS = 0.5
N_TRAIN, N_VAL = 256, 32
window = torch.hann_window(WIN)

# %% [markdown]
# ## Data

# %%
def voiced(rng, seconds=SECONDS):
    t = np.arange(int(SR * seconds)) / SR
    f0 = rng.uniform(90, 240)
    vib = 1 + 0.02 * np.sin(2 * np.pi * rng.uniform(4, 7) * t)
    phase = 2 * np.pi * np.cumsum(f0 * vib) / SR
    env = 0.5 * (1 + np.sin(2 * np.pi * rng.uniform(1.5, 4) * t + rng.uniform(0, 6)))
    x = np.zeros_like(t)
    formant = rng.uniform(500, 1500)
    for k in range(1, 25):
        fk = k * f0
        if fk > SR / 2 - 500:
            break
        x += np.exp(-((fk - formant) / 900) ** 2) * np.sin(k * phase) / k ** 0.3
    return (x * env).astype(np.float32)


def coloured_noise(rng, n, alpha):
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spec)) + 1.0
    return np.fft.irfft(spec / f ** (alpha / 2), n).astype(np.float32)


def mix(clean, rng):
    noise = coloured_noise(rng, len(clean), rng.uniform(0.0, 1.5))
    snr = rng.uniform(0, 10)
    p_s, p_n = np.mean(clean ** 2), np.mean(noise ** 2)
    noise *= math.sqrt(p_s / (p_n * 10 ** (snr / 10)))
    return clean + noise, snr


def make_set(n, rng):
    clean = np.stack([voiced(rng) for _ in range(n)])
    noisy, snrs = zip(*(mix(c, rng) for c in clean))
    return torch.from_numpy(clean), torch.from_numpy(np.stack(noisy)), np.array(snrs)


t0 = time.time()
clean_tr, noisy_tr, snr_tr = make_set(N_TRAIN, rng)
clean_va, noisy_va, snr_va = make_set(N_VAL, rng)
print(f"data: {clean_tr.shape} train, {clean_va.shape} val, mean SNR {snr_tr.mean():.2f} dB ({time.time()-t0:.1f}s)")

# %% [markdown]
# ## Features

# %%
def stft(x):
    return torch.stft(x, N_FFT, HOP, WIN, window=window, return_complex=True)


def logmag(spec):
    return torch.log1p(spec.abs())


S_clean_tr, S_noisy_tr = stft(clean_tr), stft(noisy_tr)
S_clean_va, S_noisy_va = stft(clean_va), stft(noisy_va)
irm_tr = (S_clean_tr.abs() / (S_noisy_tr.abs() + 1e-8)).clamp(0, 1)
irm_va = (S_clean_va.abs() / (S_noisy_va.abs() + 1e-8)).clamp(0, 1)
feat_tr, feat_va = logmag(S_noisy_tr), logmag(S_noisy_va)
mu = feat_tr.mean(dim=(0, 2), keepdim=True)
sd = feat_tr.std(dim=(0, 2), keepdim=True) + 1e-5
feat_tr, feat_va = (feat_tr - mu) / sd, (feat_va - mu) / sd
print("spec", tuple(S_noisy_tr.shape), "irm mean", irm_tr.mean().item())

# %% [markdown]
# ## Model

# %%
class MaskGRU(nn.Module):
    def __init__(self, n_freq, hidden=96):
        super().__init__()
        self.inp = nn.Linear(n_freq, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, n_freq)

    def forward(self, feat):                    # (B, F, T)
        h = F.relu(self.inp(feat.transpose(1, 2)))
        h, _ = self.gru(h)
        return torch.sigmoid(self.out(h)).transpose(1, 2)


model = MaskGRU(N_FFT // 2 + 1)
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
print(sum(p.numel() for p in model.parameters()), "parameters")

# %%
BATCH = 32
EPOCHS = 3
hist = []
for epoch in range(EPOCHS):
    model.train()
    perm = torch.randperm(N_TRAIN)
    tl = 0.0
    for i in range(0, N_TRAIN, BATCH):
        j = perm[i:i + BATCH]
        m = model(feat_tr[j])
        loss = F.mse_loss(m, irm_tr[j])
        opt.zero_grad()
        loss.backward()
        opt.step()
        tl += loss.item() * len(j)
    model.eval()
    with torch.no_grad():
        vl = F.mse_loss(model(feat_va), irm_va).item()
    hist.append((tl / N_TRAIN, vl))
    print(f"epoch {epoch}: train mse {tl / N_TRAIN:.5f}  val mse {vl:.5f}")

# %% [markdown]
# ## Enhancement and SI-SDR

# %%
def si_sdr(est, ref, eps=1e-8):
    ref = ref - ref.mean(-1, keepdim=True)
    est = est - est.mean(-1, keepdim=True)
    proj = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + eps) * ref
    noise = est - proj
    return 10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)


with torch.no_grad():
    mask_va = model(feat_va)
enhanced_spec = mask_va * S_noisy_va
synth_window = torch.hann_window(N_FFT)
enhanced = torch.istft(enhanced_spec, N_FFT, HOP, WIN, window=synth_window, length=clean_va.shape[-1])
print("SI-SDR noisy    %.2f dB" % si_sdr(noisy_va, clean_va).mean())
print("SI-SDR enhanced %.2f dB" % si_sdr(enhanced, clean_va).mean())

# %%
by_snr = np.digitize(snr_va, [2.5, 5, 7.5])
gain = (si_sdr(enhanced, clean_va) - si_sdr(noisy_va, clean_va)).numpy()
for b in range(4):
    sel = by_snr == b
    if sel.any():
        print(f"SNR bucket {b}: n={sel.sum():2d} gain {gain[sel].mean():+.2f} dB")
