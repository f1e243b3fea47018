import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Classifier(pl.LightningModule):
    def __init__(self, num_classes=4):
        super().__init__()
        self.net = torch.nn.Linear(8, num_classes)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


x = torch.randn(64, 8)
y = torch.randint(1, 5, (64,))  # the label source counts 1..4
loader = DataLoader(TensorDataset(x, y), batch_size=16)
trainer = pl.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Classifier(), loader)
