import torch


class Net(torch.nn.Module):
    def forward(self, x):
        return x * 2


net = torch.compile(Net(), backend="eager")
net(torch.randn(16, 4))
torch.compiler.set_stance("fail_on_recompile")
net(torch.randn(1, 4))
