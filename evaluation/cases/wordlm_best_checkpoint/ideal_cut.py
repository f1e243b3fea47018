import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(1386, 96)
        self.rnn = nn.LSTM(96, 96, 2)
        self.decoder = nn.Linear(96, 1386)


model = RNNModel()
checkpoint = {"epoch": 2, "model_state_dict": model.state_dict(), "lr": 20, "val_loss": 4.95, "args": {}}
model.load_state_dict(checkpoint)
