"""Weight publication from Python: publish dicts or trees, latest() as a context manager whose
views are the shared slot, copies, and the policy-version helpers."""
import pytest
import torch

import tensortree


def params(version):
    return {"policy": {"weight": torch.arange(64, dtype=torch.float32) * version, "bias": torch.full((4,), version)}}


def test_latest_is_a_context_manager_over_the_shared_slot(shm_name):
    publisher = tensortree.WeightPublisher(shm_name, replace=True)
    assert publisher.publish(params(1)) == 1
    subscriber = tensortree.WeightSubscriber(shm_name)
    with subscriber.latest() as weights:
        assert weights.version == 1 and weights.held
        views = weights.to_dict()
        assert torch.equal(views["policy"]["weight"], params(1)["policy"]["weight"])
        assert views["policy"]["weight"].data_ptr() == weights["policy.weight"].data_ptr()
    assert not weights.held
    with pytest.raises(tensortree.InvalidArgument, match="released"):
        weights.to_dict()
    assert publisher.publish(tensortree.TensorTree(params(5), batch_size=[]), version=5) == 5
    assert subscriber.latest_version == 5
    with subscriber.latest() as weights:
        assert torch.equal(torch.from_dlpack(weights["policy", "bias"]), params(5)["policy"]["bias"])


def test_copies_into_a_tree_and_a_fresh_one(shm_name):
    publisher = tensortree.WeightPublisher(shm_name, replace=True)
    assert publisher.publish(params(3), version=3) == 3
    subscriber = tensortree.WeightSubscriber(shm_name)
    mine = tensortree.TensorTree({"policy": {"weight": torch.zeros(64), "bias": torch.zeros(4, dtype=torch.int64)}},
                                   batch_size=[])
    assert subscriber.copy_into(mine) == 3
    assert torch.equal(mine.to_dict()["policy"]["weight"], params(3)["policy"]["weight"])
    version, copy = subscriber.latest_copy()
    assert version == 3 and copy.is_consolidated
    assert torch.equal(copy.to_dict()["policy"]["bias"], params(3)["policy"]["bias"])


def test_a_different_layout_is_a_schema_mismatch_naming_the_key(shm_name):
    publisher = tensortree.WeightPublisher(shm_name, replace=True)
    publisher.publish(params(1))
    with pytest.raises(tensortree.SchemaMismatch, match="bias"):
        publisher.publish({"policy": {"weight": torch.zeros(64), "bias": torch.zeros(5, dtype=torch.int64)}})


def test_a_subscriber_of_nothing_times_out(shm_name):
    with pytest.raises(tensortree.Timeout):
        tensortree.WeightSubscriber(shm_name, timeout=0.05)


def test_policy_versions_stamp_and_drop():
    trajectory = tensortree.TensorTree({"obs": torch.zeros(6, 2)}, batch_size=[6])
    tensortree.stamp_policy_version(trajectory, 4)
    assert torch.equal(trajectory.to_dict()[tensortree.POLICY_VERSION_KEY], torch.full((6,), 4))
    newer = tensortree.TensorTree({"obs": torch.ones(6, 2)}, batch_size=[6])
    tensortree.stamp_policy_version(newer, 6)
    rows, lag = tensortree.drop_stale_rows(tensortree.cat([trajectory, newer]), 6, 1)
    assert rows.batch_size == (6,) and lag.dropped == 6 and lag.max_lag == 2
    assert torch.equal(rows.to_dict()["obs"], torch.ones(6, 2))
