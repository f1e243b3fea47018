import torch


class GaussianRBF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, centers):
        ctx.save_for_backward(x, centers)
        return torch.cdist(x, centers.to(x.dtype))

    @staticmethod
    def backward(ctx, grad):
        x, centers = ctx.saved_tensors
        diff = x.unsqueeze(1) - centers.unsqueeze(0)      # float64: the saved centres were never cast
        return torch.bmm(grad.unsqueeze(1), diff).squeeze(1), None


x = torch.randn(256, 2, requires_grad=True)
GaussianRBF.apply(x, torch.randn(64, 2, dtype=torch.float64)).mean().backward()
