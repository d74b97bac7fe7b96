"""tensortree.Tensor and DLPack: zero-copy both ways with torch and NumPy, lifetimes either way
round, and the error hierarchy."""
import gc

import numpy
import pytest
import torch

import tensortree


def ranked(shape, dtype=torch.float32, offset=0):
    """A tensor whose every element differs: offset + its linear index."""
    count = 1
    for size in shape:
        count *= size
    return (torch.arange(count, dtype=torch.float64) + offset).to(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8,
                                   torch.int8, torch.int16, torch.float16, torch.bfloat16])
def test_torch_to_tensortree_and_back_shares_memory(dtype):
    source = ranked((4, 5), dtype)
    tensor = tensortree.from_dlpack(source)
    assert tensor.shape == (4, 5)
    assert tensor.data_ptr() == source.data_ptr()
    back = torch.from_dlpack(tensor)
    assert back.data_ptr() == source.data_ptr()
    assert back.dtype == dtype
    assert torch.equal(back, ranked((4, 5), dtype))
    source[2, 3] = 77  # one memory: the write shows through both views
    assert back[2, 3].item() == 77


def test_strided_views_keep_their_strides():
    source = ranked((6, 8))
    view = source[1:5:2, ::3]
    back = torch.from_dlpack(tensortree.from_dlpack(view))
    assert back.stride() == view.stride()
    assert torch.equal(back, view)


def test_numpy_both_ways():
    array = numpy.arange(24, dtype=numpy.int64).reshape(2, 3, 4)
    tensor = tensortree.from_dlpack(array)
    assert tensor.dtype == "int64" and tensor.device == "cpu"
    assert tensor.data_ptr() == array.ctypes.data
    back = numpy.from_dlpack(tensor)
    assert back.ctypes.data == array.ctypes.data
    assert (back == numpy.arange(24).reshape(2, 3, 4)).all()


def test_the_source_may_go_first():
    source = ranked((1000,), offset=5)
    address = source.data_ptr()
    tensor = tensortree.from_dlpack(source)
    del source
    gc.collect()
    back = torch.from_dlpack(tensor)
    assert back.data_ptr() == address
    assert torch.equal(back, ranked((1000,), offset=5))


def test_the_tensortree_tensor_may_go_first():
    tensor = tensortree.from_dlpack(ranked((3, 3), offset=9))
    view = torch.from_dlpack(tensor)
    del tensor
    gc.collect()
    assert torch.equal(view, ranked((3, 3), offset=9))


def test_a_capsule_is_consumed_once():
    capsule = ranked((2,)).__dlpack__()
    tensortree.from_dlpack(capsule)
    with pytest.raises(tensortree.InvalidArgument) as raised:
        tensortree.from_dlpack(capsule)
    assert "consumed once" in str(raised.value)


def test_an_object_without_dlpack_is_refused_as_a_value_error():
    with pytest.raises(ValueError) as raised:
        tensortree.from_dlpack([1, 2, 3])
    assert isinstance(raised.value, tensortree.InvalidArgument)
    assert "list" in str(raised.value)


def test_the_error_classes_derive_from_the_builtins_users_catch():
    assert issubclass(tensortree.Timeout, TimeoutError)
    assert issubclass(tensortree.InvalidArgument, ValueError)
    assert issubclass(tensortree.SchemaMismatch, ValueError)
    assert issubclass(tensortree.PeerLost, ConnectionError)
    assert issubclass(tensortree.NotSupported, NotImplementedError)
    for name in ["InvalidArgument", "SchemaMismatch", "CorruptData", "BackendError", "Timeout", "PeerLost",
                 "NotSupported"]:
        assert issubclass(getattr(tensortree, name), tensortree.Error)
