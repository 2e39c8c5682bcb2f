"""torchft's DiLoCo as the oracle for chapter 15's DiLoCo (when torchft is installed; it is not in the test extra).

Two torchft replica groups (one process each, gloo) meet through a real Lighthouse server and torchft's own
Manager and quorum-based process group; each runs ``torchft.local_sgd.DiLoCo`` with torch.optim.SGD as the inner
optimizer and SGD with Nesterov momentum as the outer one, on the same MLP, θ0 and batches as dpviz's ranks
(:mod:`dpviz.topics.when_a_replica_fails.rank_diloco`). After every outer step the two must hold dpviz's θ to within
1.5e-7: torchft all-reduces the pseudo-gradients θ − θ_r, dpviz the parameters θ_r, which differ in rounding only.
"""

import multiprocessing
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
