import torch

base0 = torch.randn(8192)
x0 = base0.as_strided((8, 32, 32), (32, 256, 1), 0)
base1 = torch.randn(11264)
x1 = base1.as_strided((352, 32, 32), (32, 0, 1), 0)
base2 = torch.randn(10240)
x2 = base2.as_strided((320, 32, 32), (32, 0, 1), 0)
x5 = torch.randn(96, 32).requires_grad_()
x6 = torch.randn(96).requires_grad_()
x11 = torch.randn(32, 32).requires_grad_()
x12 = torch.randn(32).requires_grad_()
torch.nn.functional.multi_head_attention_forward(x0, x1, x2, 32, 4, x5, x6, None, None, False, 0.0, x11, x12, need_weights=False)
