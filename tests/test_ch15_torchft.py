"""torchft as the oracle for chapter 15's DiLoCo and its carry-on (when torchft is installed; not in the test extra).

DiLoCo: two torchft replica groups (one process each, gloo) meet through a real Lighthouse server and torchft's own
Manager and quorum-based process group; each runs ``torchft.local_sgd.DiLoCo`` with torch.optim.SGD as the inner
optimizer and SGD with Nesterov momentum as the outer one, on the same MLP, θ0 and batches as dpviz's ranks
(:mod:`dpviz.topics.when_a_replica_fails.rank_diloco`). After every outer step the two must hold dpviz's θ to within
1.5e-7: torchft all-reduces the pseudo-gradients θ − θ_r, dpviz the parameters θ_r, which differ in rounding only.

Carry on with fewer: three torchft replica groups train data-parallel SGD with momentum through torchft's Manager
(``manager.allreduce`` averages over the quorum's participants); replica 1 sends itself SIGKILL in step 8, after its
backward pass. The survivors' all-reduce fails, their manager refuses to commit the step, the Lighthouse forms a new
quorum of the two, and they redo step 8 and go on, at the learning rate scaled by the participants, n/k. Their θ and
every loss must equal those of dpviz's carry-on run (:func:`~dpviz.topics.when_a_replica_fails.run_failure.
record_carry_on`, no regrow), which restarts the survivors' group from the state they handed over.
"""

import multiprocessing
import os
import signal
import socket
from datetime import timedelta

import numpy as np
import pytest

torchft = pytest.importorskip("torchft", reason="torchft is not installed (pip install torchft); dpviz's numpy "
                                                "recomputation of the outer step is the oracle then")

from dpviz.topics.when_a_replica_fails.run_diloco import DilocoConfig, record_diloco  # noqa: E402

K, STEPS, H = 2, 24, 8
TOLERANCE = 1.5e-7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchft_replica(replica: int, lighthouse: str, config: DilocoConfig, results) -> None:
    """One torchft replica group of one process: DiLoCo on this replica's shard of every batch; θ after each sync."""
    import torch
    from torch.distributed import TCPStore
    from torchft.local_sgd import DiLoCo
    from torchft.manager import Manager
    from torchft.process_group import ProcessGroupGloo

    from dpviz.topics.ground_floor.rank_models import build_model
    from dpviz.topics.ground_floor.rank_training import batch_indices, load_data, mse

    torch.set_num_threads(1)
    train = config.train_config()
    x_all, y_all = load_data(train)
    port = _free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)  # noqa: F841 (the Manager's store)
    model = build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)
    inner = torch.optim.SGD(model.parameters(), lr=config.lr)
    outer = torch.optim.SGD(model.parameters(), lr=config.outer_lr, momentum=config.outer_momentum, nesterov=True)
    seconds = timedelta(seconds=30)
    manager = Manager(pg=ProcessGroupGloo(), load_state_dict=lambda s: model.load_state_dict(s["model"]),
                      state_dict=lambda: {"model": model.state_dict()}, min_replica_size=config.k,
                      use_async_quorum=False,  # DiLoCo requires it
                      init_sync=False,  # every replica starts from the same seeded θ0; no healing from a peer
                      replica_id=f"replica{replica}", store_addr="127.0.0.1", store_port=port, rank=0, world_size=1,
                      lighthouse_addr=lighthouse, timeout=seconds, quorum_timeout=seconds, connect_timeout=seconds)
    after = []
    try:
        with DiLoCo(manager, [model], inner, outer, sync_every=config.H):
            for step in range(config.steps):
                rows = batch_indices(train, step)[replica * config.b:(replica + 1) * config.b]
                inner.zero_grad()
                mse(model(x_all[rows]), y_all[rows]).backward()
                inner.step()  # DiLoCo's hook takes the outer step after every H-th
                if (step + 1) % config.H == 0:
                    after.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy())
        results.put((replica, np.array(after), manager.current_step()))
    finally:
        manager.shutdown(wait=False)


def test_dpviz_diloco_outer_steps_equal_torchfts_diloco_with_a_real_lighthouse():
    from torchft._torchft import LighthouseServer

    config = DilocoConfig(k=K, steps=STEPS, H=H)
    ours = record_diloco(k=K, steps=STEPS, H=H).after["diloco"]  # (syncs, P): θ every dpviz rank holds after each
    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=K)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    replicas = [context.Process(target=torchft_replica, args=(r, lighthouse.address(), config, results))
                for r in range(K)]
    try:
        for p in replicas:
            p.start()
        got = dict((replica, (after, step)) for replica, after, step in (results.get(timeout=180) for _ in replicas))
    finally:
        for p in replicas:
            p.join(30)
            if p.is_alive():
                p.kill()
        lighthouse.shutdown()
    assert sorted(got) == list(range(K))
    for replica, (after, outer_steps) in got.items():
        assert outer_steps == STEPS // H, f"torchft's manager committed {outer_steps} outer steps"
        assert after.shape == ours.shape
        error = np.abs(after - ours).max()
        assert error <= TOLERANCE, f"replica {replica}: torchft's θ differs from dpviz's by up to {error:.3g}"
    assert np.abs(ours - ours[0]).max() > 1e-3  # the outer steps moved θ: the comparison is not of θ0 with itself


def torchft_carry_on_replica(replica: int, lighthouse: str, config, kill: tuple, results, everyone) -> None:
    """One torchft replica group of one process: SGD with momentum on shard ``replica`` of every batch, the gradient
    and the loss averaged by the manager over the quorum; the learning rate scaled by the quorum's size."""
    import torch
    from torch.distributed import TCPStore
    from torchft.manager import Manager
    from torchft.process_group import ProcessGroupGloo

    from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad
    from dpviz.topics.ground_floor.rank_training import batch_indices, load_data, mse

    torch.set_num_threads(1)
    train = config.train_config()
    x_all, y_all = load_data(train)
    port = _free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)  # noqa: F841 (the Manager's store)
    model = build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)
    sgd = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    seconds = timedelta(seconds=30)
    manager = Manager(pg=ProcessGroupGloo(timeout=timedelta(seconds=10)), load_state_dict=None, state_dict=lambda: {},
                      min_replica_size=config.k - 1, use_async_quorum=False, init_sync=False,
                      replica_id=f"replica{replica}", store_addr="127.0.0.1", store_port=port, rank=0, world_size=1,
                      lighthouse_addr=lighthouse, timeout=seconds, quorum_timeout=seconds, connect_timeout=seconds)
    everyone.wait(120)  # all heartbeat before any asks for a quorum, so that the first quorum holds all k
    losses, participants, refused = [], [], 0
    b = config.b
    try:
        step = 0
        while step < config.steps:
            manager.start_quorum()
            n = manager.num_participants()
            for group in sgd.param_groups:
                group["lr"] = config.lr * n / config.k  # dpviz's linear rule while the group is smaller
            rows = batch_indices(train, step)[replica * b:(replica + 1) * b]
            model.zero_grad(set_to_none=False)
            loss = mse(model(x_all[rows]), y_all[rows])
            loss.backward()
            if (replica, step) == kill:
                os.kill(os.getpid(), signal.SIGKILL)
            g = torch.cat([flat_grad(model), loss.detach().reshape(1)])
            manager.allreduce(g).wait()
            if manager.should_commit():
                set_flat_grad(model, g[:-1])
                sgd.step()
                losses.append(g[-1].item())
                participants.append(n)
                step += 1
            else:  # the all-reduce lost a participant: the step is not taken, and is tried again in a new quorum
                refused += 1
        theta = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy()
        results.put((replica, theta, np.array(losses, np.float32), participants, refused))
    finally:
        manager.shutdown(wait=False)


@pytest.mark.filterwarnings("ignore:k=3 ranks share")  # three ranks on two cores: slower, and no timing is checked
def test_survivors_in_torchfts_shrunken_quorum_equal_dpvizs_carry_on_bit_for_bit():
    from torchft._torchft import LighthouseServer

    from dpviz.topics.when_a_replica_fails.run_failure import FailureConfig, record_carry_on

    config = FailureConfig(k=3, steps=16)
    kill = (1, 8)
    # a short heartbeat timeout: the dead replica leaves the quorum a second after its last heartbeat; the long
    # join timeout never forms a quorum before every replica that heartbeats has asked for it
    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=config.k - 1, join_timeout_ms=60_000,
                                  heartbeat_timeout_ms=1_000)
    context = multiprocessing.get_context("spawn")
    results, everyone = context.Queue(), context.Barrier(config.k)
    replicas = [context.Process(target=torchft_carry_on_replica,
                                args=(r, lighthouse.address(), config, kill, results, everyone))
                for r in range(config.k)]
    try:
        for p in replicas:
            p.start()
        got = {r: rest for r, *rest in (results.get(timeout=240) for _ in range(config.k - 1))}
    finally:
        for p in replicas:
            p.join(30)
            if p.is_alive():
                p.kill()
        lighthouse.shutdown()
    assert replicas[kill[0]].exitcode == -signal.SIGKILL
    ours = record_carry_on(config, kill=kill, regrow_at=config.steps)  # no step after the regrow: survivors only
    assert sorted(got) == [0, 2]
    for replica, (theta, losses, participants, refused) in got.items():
        assert participants == [3] * 8 + [2] * 8, participants  # the quorum shrank at the kill's step
        assert refused >= 1  # the step whose all-reduce lost replica 1 was not committed
        assert np.array_equal(losses, ours.loss), f"replica {replica}: losses differ from dpviz's carry-on"
        assert np.array_equal(theta, ours.params), \
            f"replica {replica}: θ differs from dpviz's carry-on by up to {np.abs(theta - ours.params).max():.3g}"
