# ====================================================
# Texture classification - 5 fold CV baseline (CPU, bf16 autocast)
# ====================================================
import os
import gc
import math
import time
import random

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm


class CFG:
    debug = False
    seed = 42
    n_fold = 5
    trn_fold = [0, 1, 2, 3, 4]
    n_samples = 1000
    img_size = 32
    target_size = 5
    epochs = 2
    batch_size = 64
    lr = 2e-3
    min_lr = 1e-5
    weight_decay = 1e-4
    amp = True            # bf16 autocast on CPU
    print_freq = 10
    output_dir = "./outputs/"


CLASSES = ["hstripe", "vstripe", "diag", "checker", "blobs"]

if CFG.debug:
    CFG.epochs = 1
    CFG.trn_fold = [0]


def seed_everything(seed=42):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def get_logger(filename):
    from logging import getLogger, INFO, StreamHandler, FileHandler, Formatter
    logger = getLogger(__name__)
    logger.setLevel(INFO)
    h1 = StreamHandler()
    h1.setFormatter(Formatter("%(message)s"))
    h2 = FileHandler(filename=f"{filename}.log")
    h2.setFormatter(Formatter("%(message)s"))
    logger.addHandler(h1)
    logger.addHandler(h2)
    return logger


os.makedirs(CFG.output_dir, exist_ok=True)
LOGGER = get_logger(os.path.join(CFG.output_dir, "train"))
seed_everything(CFG.seed)


# ====================================================
# Data
# ====================================================
def render(label, size, rng):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    f = rng.uniform(0.2, 0.6)
    ph = rng.uniform(0, 2 * np.pi)
    if label == 0:
        img = np.sin(f * yy + ph)
    elif label == 1:
        img = np.sin(f * xx + ph)
    elif label == 2:
        img = np.sin(f * (xx + yy) / 1.4 + ph)
    elif label == 3:
        img = np.sign(np.sin(f * xx + ph) * np.sin(f * yy + ph))
    else:
        img = np.zeros((size, size), np.float32)
        for _ in range(rng.integers(3, 7)):
            cx, cy, r = rng.uniform(0, size, 2).tolist() + [rng.uniform(2, 6)]
            img += np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))
    img = img + rng.normal(0, 0.3, img.shape)
    return img.astype(np.float32)


rng = np.random.default_rng(CFG.seed)
train = pd.DataFrame({"image_id": [f"img_{i:05d}" for i in range(CFG.n_samples)],
                      "label": rng.integers(0, CFG.target_size, CFG.n_samples)})
IMAGES = np.stack([render(l, CFG.img_size, rng) for l in train.label.values])

# stratified folds
train["fold"] = -1
for lbl, grp in train.groupby("label"):
    idx = grp.sample(frac=1.0, random_state=CFG.seed).index
    train.loc[idx, "fold"] = np.arange(len(idx)) % CFG.n_fold
print(train.groupby(["fold", "label"]).size().unstack())


class TrainDataset(Dataset):
    def __init__(self, df, images, augment=False):
        self.df = df.reset_index(drop=False)  # keep the global row id
        self.images = images
        self.augment = augment

    def __len__(self):
        return len(self.df)

    def __getitem__(self, i):
        row = self.df.iloc[i]
        img = self.images[row["index"]]
        if self.augment and random.random() < 0.5:
            img = img[::-1].copy() if random.random() < 0.5 else img[:, ::-1].copy()
        return int(row["index"]), torch.from_numpy(np.ascontiguousarray(img))[None], int(row["label"])


# ====================================================
# Model
# ====================================================
class TextureNet(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        def blk(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.features = nn.Sequential(blk(1, 16), blk(16, 32), blk(32, 64))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * 4 * 4, n_classes))

    def forward(self, x):
        return self.head(self.features(x))


# ====================================================
# Helper functions
# ====================================================
class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train_fn(loader, model, criterion, optimizer, scheduler, epoch):
    model.train()
    losses = AverageMeter()
    for step, (_, images, labels) in enumerate(loader):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=CFG.amp):
            y_preds = model(images)
            loss = criterion(y_preds, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.update(loss.item(), labels.size(0))
        if step % CFG.print_freq == 0 or step == len(loader) - 1:
            LOGGER.info(f"Epoch: [{epoch + 1}][{step}/{len(loader)}] Loss: {losses.val:.4f}({losses.avg:.4f}) "
                        f"LR: {scheduler.get_last_lr()[0]:.6f}")
    return losses.avg


def valid_fn(loader, model, criterion, oof):
    model.eval()
    losses = AverageMeter()
    for step, (idx, images, labels) in enumerate(loader):
        with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=CFG.amp):
            y_preds = model(images)
            loss = criterion(y_preds, labels)
            oof[idx] = y_preds
        losses.update(loss.item(), labels.size(0))
    return losses.avg


def get_score(y_true, logits):
    return float((logits.argmax(1) == y_true).float().mean())


# ====================================================
# Train loop
# ====================================================
def train_loop(folds, fold, oof):
    LOGGER.info(f"========== fold: {fold} training ==========")
    trn = folds[folds.fold != fold]
    val = folds[folds.fold == fold]
    train_loader = DataLoader(TrainDataset(trn, IMAGES, augment=True), batch_size=CFG.batch_size, shuffle=True,
                              drop_last=True, num_workers=0)
    valid_loader = DataLoader(TrainDataset(val, IMAGES), batch_size=CFG.batch_size * 2, shuffle=False)

    model = TextureNet(CFG.target_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=CFG.lr, weight_decay=CFG.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=CFG.epochs * len(train_loader),
                                                           eta_min=CFG.min_lr)
    criterion = nn.CrossEntropyLoss()
    best_score = -np.inf
    for epoch in range(CFG.epochs):
        start = time.time()
        avg_loss = train_fn(train_loader, model, criterion, optimizer, scheduler, epoch)
        avg_val_loss = valid_fn(valid_loader, model, criterion, oof)
        score = get_score(torch.tensor(val.label.values), oof[val.index.values])
        LOGGER.info(f"Epoch {epoch + 1} - avg_train_loss: {avg_loss:.4f} avg_val_loss: {avg_val_loss:.4f} "
                    f"score: {score:.4f} time: {time.time() - start:.0f}s")
        if score > best_score:
            best_score = score
            torch.save({"model": model.state_dict()}, CFG.output_dir + f"texturenet_fold{fold}_best.pth")
    del model, optimizer
    gc.collect()
    return best_score


if __name__ == "__main__":
    oof = torch.zeros(len(train), CFG.target_size)
    scores = []
    for fold in tqdm(CFG.trn_fold, disable=True):
        scores.append(train_loop(train, fold, oof))
        LOGGER.info(f"fold {fold} best score {scores[-1]:.4f}")
    LOGGER.info(f"CV: {np.mean(scores):.4f} +- {np.std(scores):.4f}")
    LOGGER.info(f"OOF score: {get_score(torch.tensor(train.label.values), oof):.4f}")
    pd.DataFrame(oof.numpy(), columns=CLASSES).assign(label=train.label.values).to_csv(
        CFG.output_dir + "oof.csv", index=False)
