"""Tree channels from Python: a listener, an actor's channel, trees both ways and the weights over
channels. Each end has a thread of its own, as each has a UCX node of its own in a process; the
waiting calls release the GIL, so both run in one interpreter."""
import threading

import pytest
import torch

import tensortree

if "ucx=yes" not in tensortree.build_features:
    pytest.skip("this build has no tree channels (UCX)", allow_module_level=True)


def obs(step):
    return torch.arange(12, dtype=torch.float32).reshape(4, 3) + step


def actor(address, received):
    """Sends three trees, waits for a weight version, then closes."""
    channel = tensortree.TreeChannel.connect(address, timeout=5.0)
    for step in range(3):
        channel.send({"obs": obs(step)})
    newest = None
    while newest is None:
        newest = tensortree.take_newest_weights(channel, 0.05)
    received.append((newest[0], newest[1].to_dict()["w"].clone(), channel.stats.trees_sent))
    channel.close()


def test_trees_and_weights_cross_a_channel():
    listener = tensortree.TreeListener.bind("127.0.0.1:0", timeout=5.0)
    received = []
    thread = threading.Thread(target=actor, args=(listener.address, received))
    thread.start()
    learner = None
    while learner is None:
        learner = listener.accept(0.05)
    for step in range(3):
        assert torch.equal(learner.recv().to_dict()["obs"], obs(step))
    weights = tensortree.ChannelWeightPublisher()
    assert weights.publish({"w": torch.full((8,), 2.0)}) == 1
    try:
        while not received and thread.is_alive():
            weights.offer_to(learner)
            learner.try_recv(0.01)
    except tensortree.PeerLost:
        pass  # the actor closed as soon as it had the weights (a close ends the channel so today)
    thread.join()
    version, values, sent = received[0]
    assert version == 1 and torch.equal(values, torch.full((8,), 2.0)) and sent == 3
    assert learner.stats.trees_received == 3
    with pytest.raises(tensortree.PeerLost):
        while True:
            learner.recv()


@pytest.mark.skipif("zeromq=yes" not in tensortree.build_features, reason="a build without ZeroMQ")
def test_a_credential_round_trips_through_a_key_file(tmp_path):
    key = tensortree.ChannelCredential.generate()
    key.save(tmp_path / "job.key")
    assert tensortree.ChannelCredential.from_file(tmp_path / "job.key").public_text == key.public_text
    assert tensortree.ChannelCredential.from_text(key.secret_text).public_text == key.public_text
    with pytest.raises(tensortree.InvalidArgument, match="40 characters"):
        tensortree.ChannelCredential.from_text("short")
