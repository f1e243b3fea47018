import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Retrieval(pl.LightningModule):
    """Keeps a float32 bank of item embeddings, filled during validation."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(8, 4)
        self.register_buffer("bank", torch.zeros(32, 4))

    def training_step(self, batch, batch_idx):
        x, idx = batch
        return self.encoder(x).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        x, idx = batch
        # under precision="bf16-mixed" the encoder's output is bfloat16
        self.bank[idx] = self.encoder(x)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


x = torch.randn(32, 8)
loader = DataLoader(TensorDataset(x, torch.arange(32)), batch_size=8)
trainer = pl.Trainer(max_epochs=1, accelerator="cpu", precision="bf16-mixed", logger=False,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0)
trainer.fit(Retrieval(), loader, loader)
