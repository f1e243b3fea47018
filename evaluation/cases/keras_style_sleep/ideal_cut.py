import torch

# last batch of the last epoch: 9600 - 37 * 256 = 128 recordings x 4 crops, 64-d embeddings
z = torch.randn(128 * 4, 64)
z.view(256, 4, 64)          # SleepNet.forward reshapes with model.batch_size (256 after the ramp)
