import torch

torch.manual_seed(0)
# context features scaled by the learned lengthscale: ~8000 noise-free updates grew the
# outputscale to ~19 and shrank the noise to ~1.4e-4, so in float32 the RBF Gram matrix
# of 512 close-together points is no longer numerically positive-definite
z = torch.randn(512, 4) * 0.05
K = 19.4 * torch.exp(-0.5 * torch.cdist(z, z).pow(2)) + (1.4e-4 + 1e-6) * torch.eye(512)
torch.linalg.cholesky(K)
