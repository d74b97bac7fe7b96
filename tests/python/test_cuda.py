"""CUDA tensors from Python: DLPack both ways on the device, trees of CUDA leaves, and samples
gathered onto a GPU. Skipped without a usable GPU (or a build without CUDA)."""
import pytest
import torch

import tensortree

if "cuda=yes" not in tensortree.build_features or not torch.cuda.is_available():
    pytest.skip("no usable GPU, or a build without CUDA", allow_module_level=True)


def test_cuda_tensors_cross_without_a_copy():
    source = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
    tensor = tensortree.from_dlpack(source)
    assert tensor.device == "cuda:0" and tensor.data_ptr() == source.data_ptr()
    back = torch.from_dlpack(tensor)
    assert back.device.type == "cuda" and back.data_ptr() == source.data_ptr()
    assert torch.equal(back, torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6))


def test_a_tree_of_cuda_leaves_and_its_dict():
    tree = tensortree.TensorTree({"obs": torch.arange(8, device="cuda").reshape(4, 2) * 3}, batch_size=[4])
    as_dict = tree.consolidate().to_dict()
    assert as_dict["obs"].device.type == "cuda"
    assert torch.equal(as_dict["obs"].cpu(), torch.arange(8).reshape(4, 2) * 3)


def test_a_sample_gathered_onto_the_gpu(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=16)
    rb.extend({"step": torch.arange(16), "obs": torch.arange(16 * 3, dtype=torch.float32).reshape(16, 3)})
    rows = rb.sample(8, device="cuda:0").to_dict()
    assert rows["obs"].device.type == "cuda" and rows["index"].device.type == "cuda"
    step = rows["step"].cpu()
    assert torch.equal(rows["obs"].cpu(), (step.unsqueeze(1) * 3 + torch.arange(3)).to(torch.float32))
