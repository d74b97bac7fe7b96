"""A C++ process writes a million rows while Python samples them through a FIFO; every element of
every sampled row is checked as it comes, and every element of all million rows once the writer is
done.

The FIFO hands out each row at most once, in insertion order, except that a row whose writer has not
claimed it within the sampler's grace (100 ms: a writer that died, or one descheduled that long on a
busy machine) is passed over and its place in the batch taken by the next in the queue. So sampled
rows are checked for being whole and never sampled twice, not for being all there: the full check
of the million reads the storage itself."""
import os
import subprocess

import torch

import tensortree

ROWS = 1_000_000
BATCH = 10_000


def expect_rows(step, obs, reward):
    assert torch.equal(obs, (step.unsqueeze(1) * 8 + torch.arange(6)).to(torch.int32))
    assert torch.equal(reward, step.to(torch.float64) / 4)


def test_a_million_rows_from_a_cpp_writer(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=1 << 20, sampler=tensortree.FifoSampler(), timeout=30)
    writer = subprocess.Popen([os.environ["TENSORTREE_REPLAY_WRITER"], str(rb.path), str(ROWS), "1000"])
    sampled = []
    try:
        # Fewer batches than the rows fill, so that passed-over rows never leave a batch waiting.
        for _ in range(ROWS // BATCH - 1):
            rows = rb.sample(BATCH).to_dict()
            expect_rows(rows["step"], rows["obs"], rows["next"]["reward"])
            assert torch.equal(rows["index"], rows["step"])  # step s lives in storage row s
            sampled.append(rows["step"].clone())
    finally:
        assert writer.wait(timeout=60) == 0
    assert rb.write_count == ROWS
    every = torch.cat(sampled)
    assert torch.unique(every).numel() == every.numel()  # no row twice
    stored = rb.storage.to_dict()
    step = stored["step"][:ROWS]
    assert torch.equal(step, torch.arange(ROWS))
    expect_rows(step, stored["obs"][:ROWS], stored["next"]["reward"][:ROWS])
