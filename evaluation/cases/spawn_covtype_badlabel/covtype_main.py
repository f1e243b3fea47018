"""Forest cover type classification with DistributedDataParallel on CPU workers.

Adapted from the pytorch/examples ImageNet script (main.py) for tabular data:

    python covtype_main.py --multiprocessing-distributed --nprocs 2

The survey data is read from an in-memory CSV (a stand-in for covtype.csv, 54 columns
of terrain features and a Cover_Type code 1-7).
"""
import argparse
import csv
import io
import os
import random
import time
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim
import torch.utils.data
import torch.utils.data.distributed

parser = argparse.ArgumentParser(description='PyTorch Covertype Training')
parser.add_argument('--epochs', default=3, type=int, metavar='N',
                    help='number of total epochs to run')
parser.add_argument('-b', '--batch-size', default=64, type=int, metavar='N',
                    help='mini-batch size per process')
parser.add_argument('--lr', '--learning-rate', default=0.05, type=float,
                    metavar='LR', help='initial learning rate', dest='lr')
parser.add_argument('--momentum', default=0.9, type=float, metavar='M',
                    help='momentum')
parser.add_argument('--wd', '--weight-decay', default=1e-4, type=float,
                    metavar='W', help='weight decay (default: 1e-4)',
                    dest='weight_decay')
parser.add_argument('-p', '--print-freq', default=10, type=int,
                    metavar='N', help='print frequency (default: 10)')
parser.add_argument('--world-size', default=1, type=int,
                    help='number of nodes for distributed training')
parser.add_argument('--rank', default=0, type=int,
                    help='node rank for distributed training')
parser.add_argument('--dist-url', default='tcp://127.0.0.1:23456', type=str,
                    help='url used to set up distributed training')
parser.add_argument('--dist-backend', default='gloo', type=str,
                    help='distributed backend')
parser.add_argument('--nprocs', default=2, type=int,
                    help='worker processes per node')
parser.add_argument('--seed', default=None, type=int,
                    help='seed for initializing training. ')
parser.add_argument('--multiprocessing-distributed', action='store_true',
                    help='Use multi-processing distributed training to launch '
                         'N processes per node')

NUM_FEATURES = 54
NUM_CLASSES = 7


def synth_covtype_csv(n_rows=4096, seed=2019):
    """The survey as a CSV string: 54 terrain columns and Cover_Type (1-7)."""
    rng = random.Random(seed)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([f'f{i}' for i in range(NUM_FEATURES)] + ['Cover_Type'])
    for r in range(n_rows):
        cover = rng.randint(1, NUM_CLASSES)
        feats = [round(rng.gauss(cover * 0.3 if i < 10 else 0.0, 1.0), 3) for i in range(NUM_FEATURES)]
        if r == 2861:
            cover = 8  # plot re-surveyed in 2019, coded 8 ("unclassified") by the field team
        w.writerow(feats + [cover])
    return buf.getvalue()


class CovtypeDataset(torch.utils.data.Dataset):
    def __init__(self, text):
        rows = list(csv.DictReader(io.StringIO(text)))
        self.x = torch.tensor([[float(r[f'f{i}']) for i in range(NUM_FEATURES)] for r in rows])
        # Cover_Type is 1-based in the survey
        self.y = torch.tensor([int(r['Cover_Type']) - 1 for r in rows])
        self.x = (self.x - self.x.mean(0)) / self.x.std(0)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def main():
    args = parser.parse_args()

    if args.seed is not None:
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        warnings.warn('You have chosen to seed training. '
                      'This will turn on the CUDNN deterministic setting, '
                      'which can slow down your training considerably!')

    args.distributed = args.world_size > 1 or args.multiprocessing_distributed
    nprocs = args.nprocs
    if args.multiprocessing_distributed:
        # Since we have nprocs processes per node, the total world_size
        # needs to be adjusted accordingly
        args.world_size = nprocs * args.world_size
        # Use torch.multiprocessing.spawn to launch distributed processes: the
        # main_worker process function
        mp.spawn(main_worker, nprocs=nprocs, args=(nprocs, args))
    else:
        # Simply call main_worker function
        main_worker(0, nprocs, args)


def main_worker(local_rank, nprocs, args):
    torch.set_num_threads(1)
    if args.distributed:
        if args.multiprocessing_distributed:
            # For multiprocessing distributed training, rank needs to be the
            # global rank among all the processes
            args.rank = args.rank * nprocs + local_rank
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)
    print("=> creating model, rank {}".format(args.rank))
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(NUM_FEATURES, 128), nn.BatchNorm1d(128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(64, NUM_CLASSES),
    )
    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr,
                                momentum=args.momentum,
                                weight_decay=args.weight_decay)

    dataset = CovtypeDataset(synth_covtype_csv())
    n_val = len(dataset) // 8
    train_dataset = torch.utils.data.Subset(dataset, range(n_val, len(dataset)))
    val_dataset = torch.utils.data.Subset(dataset, range(n_val))

    if args.distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
    else:
        train_sampler = None

    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
        num_workers=0, sampler=train_sampler)
    val_loader = torch.utils.data.DataLoader(
        val_dataset, batch_size=256, shuffle=False, num_workers=0)

    for epoch in range(args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        train(train_loader, model, criterion, optimizer, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        if args.rank % nprocs == 0:
            print(f' * epoch {epoch} Acc@1 {acc1:.3f}')
    if args.distributed:
        dist.destroy_process_group()


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter('Time', ':6.3f')
    losses = AverageMeter('Loss', ':.4e')
    top1 = AverageMeter('Acc@1', ':6.2f')
    model.train()
    end = time.time()
    for i, (features, target) in enumerate(train_loader):
        output = model(features)
        loss = criterion(output, target)
        acc1, = accuracy(output, target, topk=(1,))
        losses.update(loss.item(), features.size(0))
        top1.update(acc1[0].item(), features.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
        if i % args.print_freq == 0 and args.rank == 0:
            print(f'Epoch: [{epoch}][{i}/{len(train_loader)}]\t{batch_time}\t{losses}\t{top1}')


def validate(val_loader, model, criterion, args):
    top1 = AverageMeter('Acc@1', ':6.2f')
    model.eval()
    with torch.no_grad():
        for features, target in val_loader:
            output = model(features)
            acc1, = accuracy(output, target, topk=(1,))
            top1.update(acc1[0].item(), features.size(0))
    return top1.avg


if __name__ == '__main__':
    main()
