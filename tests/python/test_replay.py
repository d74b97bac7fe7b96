"""The replay buffer from Python in TorchRL's words: samplers, extend from dicts and trees, sample
with 'index' and '_weight', priorities, a rate limiter, checkpoints, and a second handle by name."""
import pytest
import torch

import tensortree


def steps(first, count, trajectory=0):
    """Rows whose every element derives from the row's step."""
    step = torch.arange(first, first + count, dtype=torch.int64)
    return {
        "step": step,
        "trajectory": torch.full((count,), trajectory, dtype=torch.int64),
        "obs": (step.unsqueeze(1) * 4 + torch.arange(4)).to(torch.float32),
        "next": {"reward": step.to(torch.float64) / 2},
    }


def check_rows(batch):
    """Every element of a sampled batch against its step; the storage row in 'index' holds it."""
    rows = batch.to_dict()
    step = rows["step"]
    assert torch.equal(rows["obs"], (step.unsqueeze(1) * 4 + torch.arange(4)).to(torch.float32))
    assert torch.equal(rows["next"]["reward"], step.to(torch.float64) / 2)
    return rows


def test_random_sampler_returns_whole_rows_and_their_index(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=64)
    rb.extend(steps(0, 40))
    rb.extend(tensortree.TensorTree(steps(40, 10), batch_size=[10]))
    assert len(rb) == 50 and rb.write_count == 50 and rb.capacity == 64
    rows = check_rows(rb.sample(32))
    assert rows["index"].dtype == torch.int64
    assert torch.equal(rows["index"], rows["step"])  # step s was written to storage row s
    assert "_weight" not in rows
    assert rb.sample_count == 32


def test_prioritized_sampler_weights_and_update_priority(shm_name):
    sampler = tensortree.PrioritizedSampler(max_capacity=16, alpha=1.0, beta=1.0)
    rb = tensortree.ReplayBuffer.create(shm_name, sampler=sampler, seed=7)
    rb.extend(steps(0, 16))
    rb.update_priority(torch.arange(16), torch.ones(16))
    rb.update_priority([3], [1000.0])
    rows = check_rows(rb.sample(256))
    assert rows["_weight"].dtype == torch.float32
    # Row 3 holds 1000 / 1015 of the mass; TorchRL's weight for it is (p_3 / p_min)^-beta.
    drawn_3 = (rows["index"] == 3).sum().item()
    assert drawn_3 > 200
    assert torch.allclose(rows["_weight"][rows["index"] == 3], torch.tensor(1.0 / 1000.0))
    assert torch.allclose(rows["_weight"][rows["index"] != 3], torch.tensor(1.0))


def test_without_replacement_draws_every_row_once_per_pass(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=30, sampler=tensortree.SamplerWithoutReplacement())
    rb.extend(steps(0, 30))
    seen = torch.cat([check_rows(rb.sample(10))["index"] for _ in range(3)])
    assert torch.equal(seen.sort().values, torch.arange(30))


def test_slice_sampler_returns_runs_of_one_trajectory(shm_name):
    sampler = tensortree.SliceSampler(slice_len=4, traj_key="trajectory")
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=64, sampler=sampler)
    rb.extend(steps(0, 16, trajectory=1))
    rb.extend(steps(16, 16, trajectory=2))
    rows = check_rows(rb.sample(16))
    for run in rows["step"].reshape(4, 4):
        assert torch.equal(run - run[0], torch.arange(4))
    for run in rows["trajectory"].reshape(4, 4):
        assert (run == run[0]).all()


def test_fifo_gives_each_row_once_oldest_first(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=32, sampler=tensortree.FifoSampler())
    rb.extend(steps(0, 20))
    assert torch.equal(check_rows(rb.sample(8))["step"], torch.arange(8))
    assert torch.equal(check_rows(rb.sample(8))["step"], torch.arange(8, 16))


def test_a_second_handle_opens_it_by_name(shm_name):
    tensortree.ReplayBuffer.create(shm_name, capacity=16).extend(steps(0, 16))
    other = tensortree.ReplayBuffer.open(shm_name)
    assert len(other) == 16
    check_rows(other.sample(16))
    assert other.path == tensortree.ReplayBuffer.shared_memory_path(shm_name)


def test_rate_limiter_min_size_makes_sample_wait(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=16, rate_limiter=tensortree.RateLimiter.min_size(8),
                                        timeout=0.2)
    rb.extend(steps(0, 4))
    with pytest.raises(tensortree.Timeout):
        rb.sample(2)
    rb.extend(steps(4, 4))
    check_rows(rb.sample(2))


def test_checkpoint_is_a_buffer_of_its_own(shm_name, tmp_path):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=16)
    rb.extend(steps(0, 12))
    info = rb.checkpoint(tmp_path / "checkpoint")
    assert (info.inserted, info.rows) == (12, 12)
    restored = tensortree.ReplayBuffer.open(str(tmp_path / "checkpoint"))
    assert len(restored) == 12
    check_rows(restored.sample(12))


def test_errors_are_typed_and_say_what_to_do(shm_name):
    with pytest.raises(tensortree.InvalidArgument, match="create it first"):
        tensortree.ReplayBuffer.open(shm_name)
    with pytest.raises(ValueError, match="capacity"):
        tensortree.ReplayBuffer.create(shm_name)
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=8, timeout=0.05)
    with pytest.raises(TimeoutError):
        rb.sample(1)
    rb.extend(steps(0, 4))
    with pytest.raises(tensortree.SchemaMismatch, match="obs"):
        rb.extend({"step": torch.zeros(2, dtype=torch.int64), "trajectory": torch.zeros(2, dtype=torch.int64),
                   "obs": torch.zeros(2, 5), "next": {"reward": torch.zeros(2, dtype=torch.float64)}})
    with pytest.raises(tensortree.InvalidArgument):
        rb.update_priority([0, 1], [1.0])
