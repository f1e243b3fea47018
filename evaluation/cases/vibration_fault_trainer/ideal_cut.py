import torch


def log_stft(n_frames):
    # torch.stft(...).abs() lays the (129, n_frames) spectrogram out with strides (1, 129)
    return torch.randn(n_frames, 129).t().unsqueeze(0)


batch = [log_stft(65) for _ in range(32)]   # 4096-sample windows: 1 + 4096 // 64 = 65 frames
batch[17] = log_stft(61)                    # rec 4506 is only 3873 samples long: 1 + 3873 // 64 = 61
torch.stack(batch, 0)                       # what default_collate does with the batch
