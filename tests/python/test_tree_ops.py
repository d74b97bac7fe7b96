"""TensorDict's operations on tensortree.TensorTree from Python: batch indexing, stack and cat,
apply, arithmetic, and to_dict's views of a consolidated tree."""
import numpy
import pytest
import torch

import tensortree

from test_tree import expect_values, trajectory


def ranked_tree(offset=0):
    return tensortree.TensorTree(trajectory(offset), batch_size=[4])


def torch_of(tree, key):
    return torch.from_dlpack(tree[key])


def test_an_int_drops_the_batch_dimension():
    row = ranked_tree(2)[1]
    assert row.batch_size == ()
    assert torch.equal(torch_of(row, "obs"), trajectory(2)["obs"][1])
    assert torch_of(row, "next.done").item() == 1


def test_a_slice_is_a_view_of_the_rows():
    tree = ranked_tree(3)
    rows = tree[1:4:2]
    assert rows.batch_size == (2,)
    assert torch.equal(torch_of(rows, "obs"), trajectory(3)["obs"][1:4:2])
    assert rows["obs"].data_ptr() == tree["obs"].data_ptr() + 3 * 4
    with pytest.raises(tensortree.InvalidArgument):
        tree[::-1]


@pytest.mark.parametrize("index", [[3, 0, 3], torch.tensor([3, 0, 3]), numpy.array([3, 0, 3])])
def test_an_index_list_or_tensor_gathers_rows(index):
    rows = ranked_tree(4)[index]
    assert rows.batch_size == (3,)
    expected = trajectory(4)
    assert torch.equal(torch_of(rows, "action"), expected["action"][[3, 0, 3]])
    assert numpy.array_equal(numpy.from_dlpack(rows["next", "reward"]), expected["next"]["reward"][[3, 0, 3]])


def test_a_bool_mask_selects_rows():
    rows = ranked_tree(5)[torch.tensor([True, False, False, True])]
    assert rows.batch_size == (2,)
    assert torch.equal(torch_of(rows, "obs"), trajectory(5)["obs"][[0, 3]])
    assert torch.equal(torch_of(rows, "next.done"), trajectory(5)["next"]["done"][[0, 3]])


def test_a_tuple_indexes_one_batch_dimension_after_another():
    grid = tensortree.TensorTree({"x": torch.arange(24).reshape(2, 3, 4)}, batch_size=[2, 3])
    assert torch.equal(torch_of(grid[1, 2], "x"), torch.arange(24).reshape(2, 3, 4)[1, 2])
    assert torch.equal(torch_of(grid[:, 1], "x"), torch.arange(24).reshape(2, 3, 4)[:, 1])
    assert torch.equal(torch_of(grid[0, -1], "x"), torch.arange(24).reshape(2, 3, 4)[0, -1])
    with pytest.raises(tensortree.InvalidArgument):
        grid[0, 3]


def test_stack_and_cat():
    a, b = ranked_tree(1), ranked_tree(100)
    stacked = tensortree.stack([a, b])
    assert stacked.batch_size == (2, 4)
    expect_values(stacked[1], 100)
    joined = tensortree.cat([a, b])
    assert joined.batch_size == (8,)
    expect_values(joined[4:], 100)
    expect_values(joined[:4], 1)


def test_apply_calls_python_with_torch_tensors():
    seen = []

    def double(leaf):
        seen.append(type(leaf))
        return leaf * 2

    doubled = ranked_tree(3).apply(double)
    assert seen == [torch.Tensor] * 4
    assert torch.equal(torch_of(doubled, "obs"), trajectory(3)["obs"] * 2)
    assert torch.equal(torch_of(doubled, "next.done"), trajectory(3)["next"]["done"] * 2)


def test_arithmetic_with_trees_and_scalars():
    a, b = ranked_tree(1), ranked_tree(10)
    expected_a, expected_b = trajectory(1)["obs"], trajectory(10)["obs"]
    assert torch.equal(torch_of(a + b, "obs"), expected_a + expected_b)
    assert torch.equal(torch_of(b - a, "obs"), expected_b - expected_a)
    assert torch.equal(torch_of(a * 3, "obs"), expected_a * 3)
    assert torch.equal(torch_of(2 - a, "obs"), 2 - expected_a)
    assert torch.allclose(torch_of(1 / (a + 1), "obs"), 1 / (expected_a + 1))
    assert torch.equal(torch_of(-a, "obs"), -expected_a)
    pointer = a["obs"].data_ptr()
    a += b
    assert a["obs"].data_ptr() == pointer
    assert torch.equal(torch_of(a, "obs"), expected_a + expected_b)


def test_to_dict_of_a_consolidated_tree_views_its_one_buffer():
    tree = tensortree.TensorTree(trajectory(6), batch_size=[4]).consolidate()
    as_dict = tree.to_dict()
    for key in tree.keys(include_nested=True, leaves_only=True):
        leaf = as_dict[key] if isinstance(key, str) else as_dict[key[0]][key[1]]
        assert leaf.data_ptr() == tree[key].data_ptr()
    assert as_dict["next"]["done"].dtype == torch.uint8
    assert torch.equal(as_dict["obs"], trajectory(6)["obs"])
    assert torch.equal(as_dict["next"]["reward"], torch.from_numpy(trajectory(6)["next"]["reward"]))


def test_bool_leaves_cross_as_torch_bool():
    flags = torch.tensor([True, False, True, True])
    tree = tensortree.TensorTree({"done": flags}, batch_size=[4])
    assert tree["done"].dtype == "bool"
    assert tree["done"].data_ptr() == flags.data_ptr()
    assert torch.equal(tree.to_dict()["done"], flags)
    assert torch.equal(tree.consolidate().to_dict()["done"], flags)


def test_tensordict_round_trip_when_it_is_installed():
    tensordict = pytest.importorskip("tensordict")
    tree = ranked_tree(8)
    td = tree.to_tensordict()
    assert isinstance(td, tensordict.TensorDict)
    assert td["obs"].data_ptr() == tree["obs"].data_ptr()
    back = tensortree.TensorTree.from_tensordict(td)
    expect_values(back, 8)


def test_to_dict_gives_the_same_views_until_the_tree_changes():
    tree = ranked_tree(2)
    first, second = tree.to_dict(), tree.to_dict()
    assert first is not second and first["next"] is not second["next"]
    assert first["obs"] is second["obs"]  # as TensorDict gives its own tensors
    first["extra"] = 1
    assert "extra" not in tree.to_dict()
    tree["obs"] = torch.ones(4, 3)
    assert torch.equal(tree.to_dict()["obs"], torch.ones(4, 3))
    tree["next", "reward"] = numpy.zeros(4)
    assert torch.equal(tree.to_dict()["next"]["reward"], torch.zeros(4, dtype=torch.float64))
