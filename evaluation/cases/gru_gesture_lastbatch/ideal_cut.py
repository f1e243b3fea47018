import torch

rnn = torch.nn.GRU(32, 32, num_layers=2, batch_first=True, dropout=0.1)
rnn(torch.randn(16, 100, 32), torch.zeros(2, 32, 32))
