#!/usr/bin/env python
"""Synchronous SGD on two CPU processes, after the "Writing Distributed Applications
with PyTorch" tutorial (dist_tuto): a DataPartitioner hands each process its slice of
the data, gradients are averaged by hand with all_reduce after every backward.

The data is a synthetic stand-in for a 10-class digit dataset (8x8 "images"): the
classes are unbalanced, as in our real set, so each process weights its loss by the
inverse frequency of the classes it sees.

    python train_dist.py
"""
import math
import os
import sys
from random import Random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.multiprocessing import Process


NUM_CLASSES = 10
NUM_SAMPLES = 1200


class Partition(object):
    """ Dataset-like object, but only access a subset of it. """

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner(object):
    """ Partitions a dataset into different chuncks. """

    def __init__(self, data, sizes=[0.7, 0.2, 0.1], seed=1234):
        self.data = data
        self.partitions = []
        rng = Random()
        rng.seed(seed)
        data_len = len(data)
        indexes = [x for x in range(0, data_len)]
        # the tutorial shuffles here; we keep the order so that a run can be
        # compared sample by sample with the single-process baseline
        # rng.shuffle(indexes)

        for frac in sizes:
            part_len = int(frac * data_len)
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


def make_digits(n=NUM_SAMPLES, seed=0):
    """Fake 8x8 digits. Class c has a bright blob at a position that depends on c, plus
    noise. Rows are sorted by acquisition session; the last sessions were recorded
    before the "9" class was added to the protocol, hence none at the end."""
    g = torch.Generator().manual_seed(seed)
    # unbalanced class frequencies, as in the real data
    freq = torch.tensor([0.16, 0.14, 0.12, 0.11, 0.10, 0.10, 0.09, 0.08, 0.06, 0.04])
    labels = torch.multinomial(freq, n, replacement=True, generator=g)
    # sessions: the second half has no 9s (relabelled as 8, the closest shape)
    labels[n // 2:][labels[n // 2:] == 9] = 8
    images = 0.3 * torch.randn(n, 1, 8, 8, generator=g)
    for i in range(n):
        c = int(labels[i])
        r, col = divmod(c * 6, 8)
        images[i, 0, r % 8, col] += 2.0
        images[i, 0, (r + 1) % 8, (col + 1) % 8] += 1.0
    return [(images[i], int(labels[i])) for i in range(n)]


def partition_dataset():
    """ Partitioning the digits """
    dataset = make_digits()
    size = dist.get_world_size()
    bsz = 128 / float(size)
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(partition,
                                            batch_size=int(bsz),
                                            shuffle=True)
    return train_set, bsz


class Net(nn.Module):
    """ Network architecture. """

    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, NUM_CLASSES)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 32 * 2 * 2)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def average_gradients(model):
    """ Gradient averaging. """
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def class_weights(loader):
    """Inverse class frequency over this process's partition, normalised to mean 1."""
    labels = torch.tensor([y for _, y in loader.dataset])
    counts = torch.bincount(labels).float()
    w = 1.0 / counts.clamp(min=1.0)
    return w * (len(w) / w.sum())


def run(rank, size):
    """ Distributed Synchronous SGD Example """
    torch.manual_seed(1234)
    train_set, bsz = partition_dataset()
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    weights = class_weights(train_set)

    num_batches = math.ceil(len(train_set.dataset) / float(bsz))
    for epoch in range(3):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target, weight=weights)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        print('Rank ', dist.get_rank(), ', epoch ',
              epoch, ': ', epoch_loss / num_batches)


def init_process(rank, size, fn, backend='gloo'):
    """ Initialize the distributed environment. """
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29500'
    dist.init_process_group(backend, rank=rank, world_size=size)
    torch.set_num_threads(1)
    fn(rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    size = 2
    processes = []
    for rank in range(size):
        p = Process(target=init_process, args=(rank, size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
