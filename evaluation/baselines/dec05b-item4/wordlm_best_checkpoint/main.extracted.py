import torch
from torch import nn


class RNNModel(nn.Module):
    """Encoder, recurrent module, decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ("LSTM", "GRU"):
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


model = RNNModel('LSTM', 1386, 96, 96, 2, 0.2).eval()
state_dict = {
    'epoch': 2,
    'model_state_dict': {
        'encoder.weight': torch.randn(1386, 96),
        'rnn.weight_ih_l0': torch.randn(384, 96),
        'rnn.weight_hh_l0': torch.randn(384, 96),
        'rnn.bias_ih_l0': torch.randn(384),
        'rnn.bias_hh_l0': torch.randn(384),
        'rnn.weight_ih_l1': torch.randn(384, 96),
        'rnn.weight_hh_l1': torch.randn(384, 96),
        'rnn.bias_ih_l1': torch.randn(384),
        'rnn.bias_hh_l1': torch.randn(384),
        'decoder.weight': torch.randn(1386, 96),
        'decoder.bias': torch.randn(1386),
    },
    'lr': 20,
    'val_loss': 4.946063258912829,
    'args': {
        'data': './data/synthetic',
        'model': 'LSTM',
        'emsize': 96,
        'nhid': 96,
        'nlayers': 2,
        'lr': 20,
        'clip': 0.25,
        'epochs': 2,
        'batch_size': 20,
        'bptt': 35,
        'dropout': 0.2,
        'tied': False,
        'seed': 1111,
        'log_interval': 50,
        'save': 'model.pt',
        'corpus_words': 45000,
    },
}
model.load_state_dict(state_dict)
