"""A C++ process writes a million rows while Python samples them through a FIFO: every row arrives
once, in order, and every element of each is what the writer wrote."""
import os
import subprocess

import torch

import tensortree

ROWS = 1_000_000
BATCH = 10_000


def check(batch, first):
    rows = batch.to_dict()
    step = torch.arange(first, first + BATCH, dtype=torch.int64)
    assert torch.equal(rows["step"], step)
    assert torch.equal(rows["obs"], (step.unsqueeze(1) * 8 + torch.arange(6)).to(torch.int32))
    assert torch.equal(rows["next"]["reward"], step.to(torch.float64) / 4)


def test_a_million_rows_from_a_cpp_writer(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=1 << 20, sampler=tensortree.FifoSampler(), timeout=30)
    writer = subprocess.Popen([os.environ["TENSORTREE_REPLAY_WRITER"], str(rb.path), str(ROWS), "1000"])
    try:
        for first in range(0, ROWS, BATCH):
            check(rb.sample(BATCH), first)
    finally:
        assert writer.wait(timeout=60) == 0
    assert rb.write_count == ROWS and rb.sample_count == ROWS
