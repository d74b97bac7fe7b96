#!/usr/bin/python3
"""The main job's learner in PyTorch: trains a small policy from the replay buffer that shared_job's
C++ actors fill, publishes the weights they act with, and checks every sampled element as the C++
learner (examples/shared_job/learner.cpp) does: each value derives from its row's (actor,
trajectory, step, policy_version) or from the weight version (examples/shared_job/values.cpp).

The launcher starts it in place of the C++ learner (tools/main-job --python, or shared_job
--python-learner examples/python/learner.py) with the run's flags; PYTHONPATH names the module
(build/python in the build tree)."""
import argparse
import sys
import time

import torch

import tensortree

# ---- what every element holds (values.cpp, vectorised over int64 tensors) ----------------------
MASK64 = (1 << 64) - 1


def signed(value):
    """A 64-bit constant as the int64 that has its bits."""
    value &= MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


GOLDEN, MUL1, MUL2 = signed(0x9E3779B97F4A7C15), signed(0xBF58476D1CE4E5B9), signed(0x94D049BB133111EB)


def shr(h, bits):
    """A logical right shift of int64 bits (torch's >> is arithmetic)."""
    return (h >> bits) & ((1 << (64 - bits)) - 1)


def mix(*words):
    """SplitMix64 over the words, as values.cpp's mix(); int64 arithmetic wraps as uint64 does."""
    h = torch.full_like(torch.broadcast_tensors(*[torch.as_tensor(w) for w in words])[0], GOLDEN, dtype=torch.int64)
    for word in words:
        h = h ^ (torch.as_tensor(word, dtype=torch.int64) + GOLDEN + (h << 6) + shr(h, 2))
        h = h ^ shr(h, 30)
        h = h * MUL1
        h = h ^ shr(h, 27)
        h = h * MUL2
        h = h ^ shr(h, 31)
    return h


def exact_float(h):
    return (h & 0xFFFFFF).to(torch.float32)


def weight_values(version, count):
    return exact_float(mix(torch.tensor(version), torch.arange(count), torch.tensor(0), torch.tensor(1)))


def expected_rows(rows, params, obs_dim):
    """What the observation, action, reward and done of each sampled row must hold."""
    actor, traj, step, version = rows["actor"], rows["trajectory"], rows["step"], rows[tensortree.POLICY_VERSION_KEY]
    j = torch.arange(obs_dim) + 16
    obs = exact_float(mix(actor[:, None], traj[:, None], step[:, None], j[None, :]))
    reward = exact_float(mix(actor, traj, step, torch.tensor(2))) / 256.0
    action_index = (actor * 7919 + step) % params
    action = exact_float(mix(version, action_index, torch.tensor(0), torch.tensor(1))).to(torch.int64)
    return obs, action, reward


class Checker:
    """Counts the wrong elements of each batch, printing the first few."""

    def __init__(self, args, actor_ids):
        self.args, self.actor_ids, self.printed = args, actor_ids, 0

    def report(self, what, rows, where):
        for r in where.nonzero().flatten()[: max(0, 10 - self.printed)].tolist():
            print(f"wrong element: {what} of batch row {r} (actor {rows['actor'][r]}, trajectory "
                  f"{rows['trajectory'][r]}, step {rows['step'][r]})", file=sys.stderr)
            self.printed += 1

    def wrong(self, rows, newest_version):
        a = self.args
        version = rows[tensortree.POLICY_VERSION_KEY]
        in_range = ((rows["actor"] >= 0) & (rows["actor"] < self.actor_ids) & (rows["trajectory"] >= 0) &
                    (rows["step"] >= 0) & (rows["step"] < a.steps) & (version >= 1) & (version <= newest_version))
        wrong = 4 * int((~in_range).sum())
        self.report("identity", rows, ~in_range)
        rows = {key: value[in_range] for key, value in rows.items() if key != "next"} | {
            "next": {key: value[in_range] for key, value in rows["next"].items()}}
        obs, action, reward = expected_rows(rows, a.params, a.obs_dim)
        for what, bad in (("observation", (rows["observation"] != obs).any(dim=1)),
                          ("action", rows["action"] != action),
                          ("next/reward", rows["next"]["reward"] != reward),
                          ("next/done", rows["next"]["done"] != (rows["step"] == a.steps - 1))):
            self.report(what, rows, bad)
        wrong += int((rows["observation"] != obs).sum()) + int((rows["action"] != action).sum())
        wrong += int((rows["next"]["reward"] != reward).sum())
        wrong += int((rows["next"]["done"] != (rows["step"] == a.steps - 1)).sum())
        return wrong


# ---- the learner -------------------------------------------------------------------------------
def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, kind, default in (("--seconds", float, 10), ("--actors", int, 3), ("--capacity", int, 1 << 15),
                                ("--steps", int, 64), ("--obs-dim", int, 256), ("--batch", int, 256),
                                ("--publish-every", int, 100), ("--max-lag", int, 8), ("--params", int, 1 << 16),
                                ("--remote-actors", int, 0), ("--channel-timeout", float, 3),
                                ("--launcher-pid", int, 0), ("--name", str, "python_learner"), ("--role", str, "")):
        parser.add_argument(flag, type=kind, default=default)
    parser.add_argument("--kill-actor", action="store_true")
    parser.add_argument("--corrupt", action="store_true")
    args = parser.parse_args()
    if args.remote_actors:
        parser.error("the Python learner takes local actors only (no --remote-actors)")
    return args


class Policy(torch.nn.Module):
    """A small value head trained on the sampled observations' rewards."""

    def __init__(self, obs_dim):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(obs_dim, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def forward(self, obs):
        return self.body(obs / 2.0**24).squeeze(-1)


def weights_tree(policy, params, version):
    """The publication: the checkable block the actors act with, and the trained parameters."""
    trained = {name.replace(".", "_"): value.detach() for name, value in policy.state_dict().items()}
    return {"policy": {"weight": weight_values(version, params), "version": torch.tensor([version])},
            "model": trained}


def main():
    args = parse_args()
    torch.set_num_threads(1)
    rb = tensortree.ReplayBuffer.create(args.name + "_replay", capacity=args.capacity)
    publisher = tensortree.WeightPublisher(args.name + "_policy", replace=True)
    policy = Policy(args.obs_dim)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    publisher.publish(weights_tree(policy, args.params, 1))
    checker = Checker(args, args.actors + (1 if args.kill_actor else 0))

    samples = rows_seen = wrong = dropped = max_lag = 0
    lag_sum, loss_value, start, next_report = 0.0, float("nan"), time.monotonic(), 1.0
    while (elapsed := time.monotonic() - start) < args.seconds:
        newest = publisher.version
        batch = rb.sample(args.batch)
        rows = batch.to_dict()
        wrong += checker.wrong(rows, newest)
        fresh, lag = tensortree.drop_stale_rows(batch, newest, args.max_lag)
        dropped, max_lag, lag_sum = dropped + lag.dropped, max(max_lag, lag.max_lag), lag_sum + lag.mean_lag * lag.rows
        rows_seen += args.batch
        if fresh.batch_size[0] > 0:
            train = fresh.to_dict()
            loss = torch.nn.functional.mse_loss(policy(train["observation"]), train["next"]["reward"] / 2.0**16)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_value = loss.item()
        samples += 1
        if samples % args.publish_every == 0:
            publisher.publish(weights_tree(policy, args.params, newest + 1))
        if elapsed >= next_report:
            print(f"[learner.py] {elapsed:5.1f} s  version {publisher.version:4d}  inserted {rb.write_count:9d}  "
                  f"sampled {rows_seen:9d}  loss {loss_value:.4g}  lag max {max_lag}  wrong {wrong}", flush=True)
            next_report += 1.0
    elapsed = time.monotonic() - start
    print(f"\n  Python learner (PyTorch {torch.__version__}), {elapsed:.1f} s")
    for label, value in (("inserts/s (rows)", f"{rb.write_count / elapsed:.0f}"),
                         ("samples/s (rows)", f"{rows_seen / elapsed:.0f}"),
                         ("batches sampled", samples), ("weight versions published", publisher.version),
                         ("policy lag (mean / max)", f"{lag_sum / max(rows_seen, 1):.2f} / {max_lag}"),
                         ("stale rows dropped", dropped), ("final loss", f"{loss_value:.4g}"),
                         ("rows checked", rows_seen), ("wrong elements", wrong)):
        print(f"  {label:<26} {value:>14}")
    sys.stdout.flush()
    return 0 if wrong == 0 and samples > 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tensortree.Error as error:
        print(f"[learner.py] failed: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
