"""Tree channels from Python: a listener, an actor's channel, trees both ways and the weights over
channels. Each end has a thread of its own, as each has a ZeroMQ socket of its own in a process; the
waiting calls release the GIL, so both run in one interpreter."""
import threading

import pytest
import torch

import tensortree

if "zeromq=yes" not in tensortree.build_features:
    pytest.skip("this build has no tree channels (ZeroMQ)", allow_module_level=True)


def obs(step):
    return torch.arange(12, dtype=torch.float32).reshape(4, 3) + step


def actor(address, key, received):
    """Sends three trees, waits for a weight version, then closes."""
    channel = tensortree.TreeChannel.connect(address, timeout=5.0, credential=key)
    for step in range(3):
        channel.send({"obs": obs(step)})
    newest = None
    while newest is None:
        newest = tensortree.take_newest_weights(channel, 0.05)
    received.append((newest[0], newest[1].to_dict()["w"].clone(), channel.stats.trees_sent))
    channel.close()


def test_trees_and_weights_cross_a_channel():
    key = tensortree.ChannelCredential.generate()
    listener = tensortree.TreeListener.bind("127.0.0.1:0", timeout=5.0, credential=key)
    received = []
    thread = threading.Thread(target=actor, args=(listener.address, key, received))
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
    except tensortree.ChannelClosed:
        pass  # the actor closed, in order, as soon as it had the weights
    thread.join()
    version, values, sent = received[0]
    assert version == 1 and torch.equal(values, torch.full((8,), 2.0)) and sent == 3
    assert learner.stats.trees_received == 3
    with pytest.raises(tensortree.ChannelClosed):
        while True:
            learner.recv()


def test_a_peer_without_the_credential_is_refused(tmp_path):
    key = tensortree.ChannelCredential.generate()
    key.save(tmp_path / "job.key")
    assert tensortree.ChannelCredential.from_file(tmp_path / "job.key").public_text == key.public_text
    listener = tensortree.TreeListener.bind("127.0.0.1:0", credential=key)
    with pytest.raises(tensortree.InvalidArgument, match="refused this process's credential"):
        tensortree.TreeChannel.connect(listener.address, timeout=2.0, credential=tensortree.ChannelCredential.generate())
    with pytest.raises(tensortree.InvalidArgument, match="needs the job's credential"):
        tensortree.TreeListener.bind("0.0.0.0:0", plain_loopback=True)


def test_a_sender_waits_for_the_learners_credit_and_a_close_ends_the_channel_in_order():
    key = tensortree.ChannelCredential.generate()
    listener = tensortree.TreeListener.bind("127.0.0.1:0", timeout=5.0, credential=key, max_trees_in_flight=2)
    sent = []

    def send_ten():
        channel = tensortree.TreeChannel.connect(listener.address, timeout=5.0, credential=key)
        for step in range(10):
            channel.send({"obs": obs(step)})
            sent.append(step)
        channel.close()

    thread = threading.Thread(target=send_ten)
    thread.start()
    learner = listener.accept(10.0)
    thread.join(0.4)  # the learner takes nothing meanwhile: two trees are all its credit allows
    assert sent == [0, 1]
    for step in range(10):
        assert torch.equal(learner.recv().to_dict()["obs"], obs(step))
    thread.join()
    assert sent == list(range(10))
    with pytest.raises(tensortree.ChannelClosed):
        learner.recv()


def test_a_channel_set_serves_actors_in_turn_and_reports_each_end():
    key = tensortree.ChannelCredential.generate()
    listener = tensortree.TreeListener.bind("127.0.0.1:0", timeout=5.0, credential=key)
    actors = [threading.Thread(target=lambda: send_three(listener.address, key)) for _ in range(3)]
    for thread in actors:
        thread.start()
    channels = tensortree.ChannelSet()
    keys = [channels.accept(listener, 10.0) for _ in actors]
    assert None not in keys and len(channels) == 3
    steps = {key: [] for key in keys}
    ended = {}
    while len(ended) < 3:
        event = channels.next(5.0)
        assert event is not None
        if event.tree is not None:
            steps[event.key].append(int(event.tree.to_dict()["obs"][0, 0]))
        else:
            ended[event.key] = event.ended
    for thread in actors:
        thread.join()
    assert all(found == [0, 1, 2] for found in steps.values())
    assert all(isinstance(error, tensortree.ChannelClosed) for error in ended.values())
    assert len(channels) == 0


def send_three(address, key):
    channel = tensortree.TreeChannel.connect(address, timeout=5.0, credential=key)
    for step in range(3):
        channel.send({"obs": obs(step)})
    channel.close()


def test_a_reconnecting_channel_keeps_trees_until_a_learner_listens():
    key = tensortree.ChannelCredential.generate()
    address = tensortree.TreeListener.bind("127.0.0.1:0", credential=key).address  # then nothing listens there
    actor = tensortree.ReconnectingChannel(address, credential=key, max_kept_trees=2, first_retry=0.01)
    assert not actor.connected
    for step in range(3):
        actor.send({"obs": obs(step)})
    assert actor.stats.trees_kept == 2 and actor.stats.trees_dropped == 1
    assert actor.take_newest_weights(0.01) is None
    listener = tensortree.TreeListener.bind(address, timeout=5.0, credential=key)
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept(10.0)))
    thread.start()
    while not actor.progress():
        pass
    thread.join()
    learner = accepted[0]
    assert [int(learner.recv().to_dict()["obs"][0, 0]) for _ in range(2)] == [1, 2]
    assert actor.stats.connections == 1 and actor.stats.trees_kept == 0
