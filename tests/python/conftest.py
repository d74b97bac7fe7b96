"""Shared fixtures: a name in /dev/shm unique to the test, removed afterwards."""
import os
import shutil

import pytest

import tensortree


@pytest.fixture
def shm_name(request):
    name = f"pytest_{os.getpid()}_{request.node.name}".replace("[", "_").replace("]", "_")[:90]
    yield name
    shutil.rmtree(tensortree.ReplayBuffer.shared_memory_path(name), ignore_errors=True)
    try:
        os.unlink(tensortree.WeightPublisher.shared_memory_path(name))
    except FileNotFoundError:
        pass
