"""Calls that wait release the GIL: other Python threads run meanwhile, and may even feed the
call that waits."""
import threading
import time

import torch

import tensortree


def test_a_waiting_sample_lets_other_threads_run_and_feed_it(shm_name):
    rb = tensortree.ReplayBuffer.create(shm_name, capacity=16, sampler=tensortree.FifoSampler(), timeout=10)
    ticks = []

    def feed():  # with a handle of its own: a shared one serves one call at a time
        writer = tensortree.ReplayBuffer.open(shm_name)
        for _ in range(20):
            ticks.append(time.monotonic())
            time.sleep(0.005)
        writer.extend({"x": torch.arange(8)})

    thread = threading.Thread(target=feed)
    start = time.monotonic()
    thread.start()
    rows = rb.sample(8)  # waits, GIL released, until the other thread's extend
    thread.join()
    assert torch.equal(rows.to_dict()["x"], torch.arange(8))
    assert len(ticks) == 20 and ticks[0] >= start


def test_a_waiting_latest_and_recv_release_it_too(shm_name):
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    try:
        before = counted[0]
        try:
            tensortree.WeightSubscriber(shm_name, timeout=0.2)  # waits for a publication nobody makes
        except tensortree.Timeout:
            pass
        assert counted[0] - before > 1000
    finally:
        stop.set()
        thread.join()
