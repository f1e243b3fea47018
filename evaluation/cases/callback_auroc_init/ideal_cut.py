from torchmetrics import AUROC

AUROC(num_classes=6)
