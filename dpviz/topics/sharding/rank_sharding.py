"""The rank side of :mod:`dpviz.topics.sharding.run_sharding`: one MLP trained at ZeRO stages 0 to 3 in the same k ranks, in torch.

Every stage starts from the same model and sees the same batches; only what a rank keeps, and what it sends,
changes. Each linear layer is one *unit*: its weight and bias laid end to end in one flat vector, padded with
zeros to a multiple of k, so that the ring cuts it into k equal chunks and rank r owns chunk ``(r + 1) % k``
(:func:`~dpviz.topics.all_reduce.rank_collectives.owned_chunk`), where the ring's reduce-scatter leaves the complete sum.

* stage 0: all parameters, all gradients, all of Adam; the ring all-reduces the gradient.
* stage 1: Adam's m and v for this rank's chunks only; reduce-scatter the gradient, step the chunks,
  all-gather the parameters.
* stage 2: as stage 1, but each layer's gradient is reduce-scattered as soon as its backward has made it,
  and only this rank's chunk is kept.
* stage 3: the parameters too live as chunks; each layer is all-gathered just before its forward, freed
  after it, gathered again for its backward, freed, and its gradient reduce-scattered.

A :class:`Meter` counts the bytes of the tensors the rank holds, by category, and keeps each phase's peak;
for one step (the last) it also keeps a trace: each event's time, the bytes held after it, its layer and what
it was (:data:`~dpviz.topics.sharding.theory.TRACE_ACTIONS`).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.all_reduce.rank_collectives import owned_chunk, ring_all_gather, ring_reduce_scatter
from dpviz.topics.ground_floor.rank_training import batch_indices, digest, load_data, make_model, mse
from dpviz.topics.sharding.theory import CATEGORIES, NO_LAYER, PHASES, TRACE_ACTIONS


class Meter:
    """Bytes this rank holds by category (:data:`~dpviz.topics.sharding.theory.CATEGORIES`), counted from the tensors.

    ``hold`` names a tensor the rank keeps, ``drop`` lets it go, ``look`` adds the present counts to the
    peak of the present phase (:data:`~dpviz.topics.sharding.theory.PHASES`). Between ``trace(t0)`` and ``untrace()``
    every phase entered, and every hold or drop given an ``action``, appends one event to ``events``:
    (seconds since ``t0``, bytes held after it, layer, action code).
    """

    def __init__(self):
        self.held = {category: {} for category in CATEGORIES}
        self.peak = np.zeros((len(PHASES), len(CATEGORIES)), np.int64)
        self.phase = 0
        self.events, self.t0 = None, 0.0

    def enter(self, phase: str) -> None:
        self.phase = PHASES.index(phase)
        self.look()
        self.mark(phase)

    def hold(self, category: str, name: str, tensor: torch.Tensor, *, action: str | None = None,
             layer: int = NO_LAYER) -> None:
        self.held[category][name] = tensor
        self.look()
        if action is not None:
            self.mark(action, layer)

    def drop(self, category: str, name: str, *, action: str | None = None, layer: int = NO_LAYER) -> None:
        del self.held[category][name]
        if action is not None:
            self.mark(action, layer)

    def look(self) -> None:
        np.maximum(self.peak[self.phase], self.now(), out=self.peak[self.phase])

    def now(self) -> list:
        return [sum(t.numel() * t.element_size() for t in tensors.values()) for tensors in self.held.values()]

    def trace(self, t0: float) -> None:
        """Start a trace, its times counted from ``t0`` (a ``time.perf_counter()``)."""
        self.events, self.t0 = [], t0

    def untrace(self) -> list:
        events, self.events = self.events, None
        return events

    def mark(self, action: str, layer: int = NO_LAYER) -> None:
        """One event of the trace, if one is running: a list append and a sum over the dozen tensors held."""
        if self.events is not None:
            self.events.append((time.perf_counter() - self.t0, sum(self.now()), layer, TRACE_ACTIONS.index(action)))


class Unit:
    """One linear layer as a padded flat vector: where its weight and bias sit, and which chunk this rank owns."""

    def __init__(self, layer: torch.nn.Linear, k: int, rank: int, offset: int):
        self.shapes = (layer.weight.shape, layer.bias.shape)
        self.numel = layer.weight.numel() + layer.bias.numel()
        self.chunk = -(-self.numel // k)                   # elements per chunk
        self.padded = self.chunk * k                       # the unit's length, padding included
        self.offset = offset                               # where the unit starts in the model's padded flat vector
        self.lo = (owned_chunk(rank, k) if k > 1 else 0) * self.chunk  # this rank's chunk, within the unit
        self.k = k

    def views(self, flat: torch.Tensor) -> tuple:
        """The weight and bias as views of a unit-long flat tensor."""
        w, b = self.shapes
        return flat[:w.numel()].view(w), flat[w.numel():w.numel() + b.numel()].view(b)

    def of(self, model_flat: torch.Tensor) -> torch.Tensor:
        """This unit's slice of a model-long padded flat tensor (a view)."""
        return model_flat[self.offset:self.offset + self.padded]

    def mine(self, unit_flat: torch.Tensor) -> torch.Tensor:
        """This rank's chunk of a unit-long flat tensor (a view)."""
        return unit_flat[self.lo:self.lo + self.chunk]


def units_of(model: torch.nn.Module, k: int, rank: int) -> list:
    units, offset = [], 0
    for layer in linear_layers(model):
        units.append(Unit(layer, k, rank, offset))
        offset += units[-1].padded
    return units


def linear_layers(model: torch.nn.Module) -> list:
    return [m for m in model if isinstance(m, torch.nn.Linear)]


def padded_flat(model: torch.nn.Module, units: list) -> torch.Tensor:
    """The model's parameters in one padded flat vector, unit by unit (a copy; padding zero)."""
    flat = torch.zeros(sum(u.padded for u in units))
    for layer, unit in zip(linear_layers(model), units):
        w, b = unit.views(unit.of(flat))
        w.copy_(layer.weight.detach())
        b.copy_(layer.bias.detach())
    return flat


def place(model: torch.nn.Module, units: list, params: torch.Tensor, grads: torch.Tensor | None) -> None:
    """Make every parameter (and its ``.grad``) a view of the padded flat buffers, so no copy is ever needed."""
    for layer, unit in zip(linear_layers(model), units):
        for p, view in zip((layer.weight, layer.bias), unit.views(unit.of(params))):
            p.data = view
        if grads is not None:
            for p, view in zip((layer.weight, layer.bias), unit.views(unit.of(grads))):
                p.grad = view


class Sharded(torch.autograd.Function):
    """A linear layer whose gradient leaves as this rank's chunk: ZeRO-2 (parameters held), ZeRO-3 (gathered).

    ``forward(x, shard, layer)``: ``shard`` is the leaf autograd hands the layer's gradient chunk to;
    ``layer`` (a :class:`Layer`) gathers and frees the full parameters and counts the bytes sent.
    """

    @staticmethod
    def forward(ctx, x, shard, layer):
        weight, bias = layer.parameters("forward")
        y = F.linear(x, weight, bias)                    # (b, out)
        layer.release("forward")
        ctx.save_for_backward(x)
        ctx.layer = layer
        return y

    @staticmethod
    def backward(ctx, grad_y):
        (x,), layer = ctx.saved_tensors, ctx.layer
        weight, bias = layer.parameters("backward")
        grad_x = grad_y @ weight if ctx.needs_input_grad[0] else None   # (b, in), as autograd's linear does
        full = torch.zeros(layer.unit.padded)             # the layer's whole gradient, until its reduce-scatter
        layer.meter.hold("layer", "grad", full, action="grad", layer=layer.index)
        grad_w, grad_b = layer.unit.views(full)
        torch.mm(grad_y.t(), x, out=grad_w)
        torch.sum(grad_y, 0, out=grad_b)
        layer.release("backward")
        layer.meter.mark("reduce-scatter", layer.index)
        layer.rs_bytes += ring_reduce_scatter(full)
        mine = layer.unit.mine(full).div_(layer.unit.k)   # the average over ranks, of this rank's chunk only
        layer.meter.drop("layer", "grad", action="reduced", layer=layer.index)  # the rest goes with `full`
        return grad_x, mine, None


class Layer:
    """What :class:`Sharded` needs of one layer: its full parameters (held, or gathered from the shards)."""

    def __init__(self, unit: Unit, meter: Meter, *, index: int, full: torch.Tensor | None, shard: torch.Tensor):
        self.unit, self.meter, self.index, self.held, self.shard = unit, meter, index, full, shard
        self.gathered = None
        self.rs_bytes = self.ag_bytes = 0

    def parameters(self, phase: str) -> tuple:
        if self.held is not None:                         # ZeRO-2: every rank keeps all parameters
            return self.unit.views(self.held)
        self.gathered = torch.zeros(self.unit.padded)     # ZeRO-3: gathered for this pass only
        self.meter.hold("layer", "params", self.gathered, action="gather", layer=self.index)
        self.unit.mine(self.gathered).copy_(self.shard.detach())
        self.ag_bytes += ring_all_gather(self.gathered)
        self.meter.mark("gathered", self.index)
        return self.unit.views(self.gathered)

    def release(self, phase: str) -> None:
        if self.gathered is not None:
            self.meter.look()
            self.meter.drop("layer", "params", action="free", layer=self.index)
            self.gathered = None


def train_stage(stage: int, rank: int, k: int, config, batches, progress_from: int) -> dict:
    """Train ``config.steps`` Adam steps at ZeRO stage ``stage``; return parameters, bytes, memory and times."""
    train = config.train_config()
    x_all, y_all = load_data(train)
    model = make_model(train)
    units = units_of(model, k, rank)
    meter = Meter()
    params = padded_flat(model, units)
    grads = torch.zeros_like(params) if stage <= 1 else None  # full gradients, in one buffer autograd writes into
    if grads is not None:
        meter.hold("grads", "all", grads)
    if stage <= 2:                                        # full parameters on every rank
        place(model, units, params, grads)
        meter.hold("params", "all", params)
    else:                                                 # ZeRO-3 keeps no full copy: the model's own tensors go
        for layer in linear_layers(model):
            layer.weight.data, layer.bias.data = torch.empty(0), torch.empty(0)
    if stage == 0:
        updated, updated_grads = [params], [grads]        # Adam steps the whole vector on every rank
    else:                                                 # each rank steps its own chunk of every unit
        if stage <= 2:
            updated = [u.mine(u.of(params)) for u in units]
        else:
            updated = [u.mine(u.of(params)).clone() for u in units]   # the shards are all a rank keeps
            for i, shard in enumerate(updated):
                meter.hold("params", f"shard{i}", shard)
            params = None
        if stage == 1:
            updated_grads = [u.mine(u.of(grads)) for u in units]
        else:
            updated_grads = [torch.zeros_like(s) for s in updated]
            for i, g in enumerate(updated_grads):
                meter.hold("grads", f"shard{i}", g)
    for p, g in zip(updated, updated_grads):
        p.requires_grad_(stage >= 2)                      # at stages 2 and 3 autograd hands each chunk its gradient
        p.grad = g
    adam = optim.Adam(updated, lr=config.lr)              # m and v are the size of what this rank updates
    for i, state in enumerate(adam.m + adam.v):
        meter.hold("optimizer", f"state{i}", state)
    layers = None
    if stage >= 2:
        layers = [Layer(u, meter, index=i, full=u.of(params) if stage == 2 else None, shard=s)
                  for i, (u, s) in enumerate(zip(units, updated))]

    def held() -> torch.Tensor:
        """What this rank holds of the parameters: the full padded vector, or (stage 3) its chunks end to end."""
        return params if stage <= 2 else torch.cat([s.detach() for s in updated])

    history, digests = [held().numpy().copy()], [digest([held()])]
    losses, seconds, rs_bytes, ag_bytes, trace = [], [], [], [], []
    start = rank * config.b
    for step, rows in enumerate(batches):
        rows = rows[start:start + config.b]
        x, y = x_all[rows], y_all[rows]
        t0 = time.perf_counter()
        if step == len(batches) - 1:                      # the last step is traced: warm, like every step but the first
            meter.trace(t0)
            meter.mark("begin")
        for g in updated_grads if stage >= 2 else [grads]:
            g.zero_()
        rs = ag = 0
        meter.enter("forward")
        if stage <= 1:
            loss = mse(model(x), y)
        else:
            loss = mse(forward(model, layers, x), y)
        meter.enter("backward")
        loss.backward()
        meter.look()
        if stage == 0:
            rs = ring_reduce_scatter(grads)               # the ring all-reduce, one phase at a time,
            ag = ring_all_gather(grads)                   # so that each phase's bytes are counted
            grads /= k
        elif stage == 1:
            for u, g in zip(units, updated_grads):
                rs += ring_reduce_scatter(u.of(grads))    # this rank's chunk now holds the sum over ranks
                g /= k
        meter.enter("step")
        adam.step()
        meter.look()
        if stage in (1, 2):
            for u in units:
                ag += ring_all_gather(u.of(params))       # every rank's updated chunks to every rank
        if stage >= 2:
            rs += sum(layer.rs_bytes for layer in layers)
            ag += sum(layer.ag_bytes for layer in layers)
            for layer in layers:
                layer.rs_bytes = layer.ag_bytes = 0
        meter.mark("end")
        seconds.append(time.perf_counter() - t0)
        if meter.events is not None:
            trace = meter.untrace()
        rs_bytes.append(rs)
        ag_bytes.append(ag)
        losses.append(loss.item())
        history.append(held().numpy().copy())
        digests.append(digest([held()]))
        launcher.report_progress(progress_from + step)
    return {"held": np.stack(history), "digest": np.array(digests, dtype="S40"), "loss": np.array(losses, np.float32),
            "memory": meter.peak.copy(), "rs_bytes": rs_bytes, "ag_bytes": ag_bytes, "seconds": seconds,
            "trace": trace, "trace_step": len(batches) - 1}


def forward(model: torch.nn.Module, layers: list, x: torch.Tensor) -> torch.Tensor:
    """The MLP's forward, each linear layer through :class:`Sharded` (its activations through the model's own)."""
    it = iter(layers)
    for module in model:
        if isinstance(module, torch.nn.Linear):
            layer = next(it)
            x = Sharded.apply(x, layer.shard, layer)
        else:
            x = module(x)
    return x


def fsdp_params(rank: int, k: int, config, batches) -> np.ndarray:
    """The oracle: the same model, data and Adam under torch's own FSDP2, ``fully_shard`` on each linear layer
    and on the whole model; the full parameters (steps+1, P) after each step, gathered by ``full_tensor``."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    train = config.train_config()
    x_all, y_all = load_data(train)
    model = make_model(train)
    mesh = init_device_mesh("cpu", (k,))
    for layer in linear_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    adam = torch.optim.Adam(model.parameters(), lr=config.lr, foreach=False)

    def full() -> np.ndarray:
        return torch.cat([p.full_tensor().detach().reshape(-1) for p in model.parameters()]).numpy().copy()

    history = [full()]
    start = rank * config.b
    for rows in batches:
        rows = rows[start:start + config.b]
        adam.zero_grad()
        mse(model(x_all[rows]), y_all[rows]).backward()   # FSDP2 reduce-scatters the gradients, averaged over ranks
        adam.step()
        history.append(full())
    return np.stack(history)


def sharding_worker(rank: int, world_size: int, config) -> dict:
    """One rank: train at ZeRO stages 0, 1, 2 and 3 from the same start on the same batches (then FSDP2, if asked)."""
    train = config.train_config()
    batches = [batch_indices(train, step) for step in range(config.steps)]
    out = {"stages": [train_stage(stage, rank, world_size, config, batches, stage * config.steps)
                      for stage in range(4)]}
    if config.fsdp:
        launcher.report_progress(4 * config.steps)        # importing FSDP2 takes seconds: a rank that has not stalled
        out["fsdp"] = fsdp_params(rank, world_size, config, batches)
    out["threads"] = torch.get_num_threads()
    dist.barrier()
    return out
