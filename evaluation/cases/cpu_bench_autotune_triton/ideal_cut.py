import torch

lin = torch.compile(torch.nn.Linear(4, 4), options={"max_autotune": True, "max_autotune_gemm_backends": "TRITON"})
with torch.no_grad():
    lin(torch.randn(2, 4))
