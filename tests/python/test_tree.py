"""tensortree.TensorTree from Python: built from nested dicts without copies, indexed by key, tuple
or dotted path, given back as torch tensors viewing the same memory, consolidated, saved and loaded
in TensorDict's layout."""
import numpy
import pytest
import torch

import tensortree


def trajectory(offset):
    """Leaves whose every element differs, and differs between offsets."""
    return {
        "obs": torch.arange(4 * 3, dtype=torch.float32).reshape(4, 3) + offset,
        "action": torch.arange(4, dtype=torch.int64) * 7 + offset,
        "next": {
            "reward": numpy.arange(4, dtype=numpy.float64) / 2 + offset,
            "done": torch.tensor([offset % 2, 1, 0, 1], dtype=torch.uint8),
        },
    }


def expect_values(tree, offset):
    expected = trajectory(offset)
    assert torch.equal(torch.from_dlpack(tree["obs"]), expected["obs"])
    assert torch.equal(torch.from_dlpack(tree["action"]), expected["action"])
    assert numpy.array_equal(numpy.from_dlpack(tree["next", "reward"]), expected["next"]["reward"])
    assert torch.equal(torch.from_dlpack(tree["next.done"]), expected["next"]["done"])


def test_a_tree_views_the_dicts_arrays_without_copying():
    source = trajectory(3)
    tree = tensortree.TensorTree(source, batch_size=[4])
    assert tree.batch_size == (4,)
    assert tree["obs"].data_ptr() == source["obs"].data_ptr()
    assert tree["next"]["reward"].data_ptr() == source["next"]["reward"].ctypes.data
    expect_values(tree, 3)


def test_keys_and_items_as_tensordict_names_them():
    tree = tensortree.TensorTree(trajectory(0), batch_size=[4])
    assert tree.keys() == ["obs", "action", "next"]
    assert tree.keys(include_nested=True, leaves_only=True) == ["obs", "action", ("next", "reward"),
                                                                ("next", "done")]
    assert [key for key, _ in tree.items(include_nested=True)] == tree.keys(include_nested=True)
    assert "next.done" in tree and ("next", "reward") in tree and "reward" not in tree
    assert len(tree) == 3


def test_to_dict_gives_torch_views_of_the_same_memory():
    tree = tensortree.TensorTree(trajectory(5), batch_size=[4])
    as_dict = tree.to_dict()
    assert as_dict["obs"].data_ptr() == tree["obs"].data_ptr()
    assert as_dict["next"]["reward"].dtype == torch.float64
    as_dict["obs"][0, 0] = -1
    assert torch.from_dlpack(tree["obs"])[0, 0].item() == -1


def test_consolidate_packs_every_leaf_and_keeps_every_value():
    tree = tensortree.TensorTree(trajectory(7), batch_size=[4])
    packed = tree.consolidate()
    assert packed.is_consolidated and not tree.is_consolidated
    expect_values(packed, 7)
    assert packed["obs"].data_ptr() != tree["obs"].data_ptr()


def test_memmap_round_trip(tmp_path):
    tree = tensortree.TensorTree(trajectory(11), batch_size=[4])
    tree.clone().memmap_(tmp_path / "saved")
    loaded = tensortree.TensorTree.load_memmap(tmp_path / "saved")
    assert loaded.keys(include_nested=True) == tree.keys(include_nested=True)
    expect_values(loaded, 11)


def test_a_leaf_of_the_wrong_batch_size_is_refused_naming_it():
    with pytest.raises(tensortree.InvalidArgument) as raised:
        tensortree.TensorTree({"obs": torch.zeros(3, 2)}, batch_size=[4])
    assert "obs" in str(raised.value)


def test_a_missing_key_is_a_key_error_naming_it():
    tree = tensortree.TensorTree(trajectory(0), batch_size=[4])
    with pytest.raises(KeyError) as raised:
        tree["next.missing"]
    assert "missing" in str(raised.value)
