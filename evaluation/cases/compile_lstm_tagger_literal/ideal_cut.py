import torch

lstm = torch.nn.LSTM(2, 3)
torch.compile(lstm, fullgraph=True)(torch.zeros(1, 2))
