import torch

n_val, n_hist = 14 * 48, 15 * 48     # history features kept one warm-up day too many
emb_store, emb_item = torch.randn(n_val, 4), torch.randn(n_val, 4)
# torch.tensor(DataFrame.values) keeps pandas' column-major layout
x_cal, x_hist = torch.randn(4, n_val).t(), torch.randn(3, n_hist).t()
torch.cat([emb_store, emb_item, x_cal, x_hist], dim=1)
