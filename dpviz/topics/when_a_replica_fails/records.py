"""The records of the chapter's runs: a restart through failures beside the unfailed run, the Young/Daly check, and
DiLoCo beside local SGD and plain data parallelism, and a group that carried on with fewer ranks and regrew.

Written by :mod:`dpviz.topics.when_a_replica_fails.run_shipped` (``python -m
dpviz.topics.when_a_replica_fails.run_shipped``) into the shipped runs. Each record gives back the object the
chapter's claims read (:meth:`RestartRecord.trainings`, :meth:`YoungDalyRecord.young_daly_check`,
:meth:`DilocoRecord.diloco_run`, :meth:`CarryOnRecord.training`), so that a sentence printed from a record is checked on that record.

Those objects are declared here, not in the fronts: a front returns them after a live run, a record rebuilds them
from its arrays, and the claims read either. The fronts' configs extend the settings below with what only a live
run needs (a stall timeout, the :class:`~dpviz.topics.ground_floor.run_training.TrainConfig` the ranks draw from).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpviz.engine.checks import check_int, check_lr, check_real
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register
from dpviz.topics.when_a_replica_fails.theory import young_daly_interval

MODES = ("dp", "local", "diloco", "streaming")  # the DiLoCo run's modes, in the order of its record's rows
MODE_NAMES = {"dp": "plain data parallelism", "local": "local SGD", "diloco": "DiLoCo", "streaming": "streaming DiLoCo"}
RESTART_STEM = "replica_restart"
YOUNG_DALY_STEM = "replica_young_daly"
DILOCO_STEM = "replica_diloco"
CARRY_ON_STEM = "replica_carry_on"


# --- what a run gives back: built by the fronts after a live run, and by the records below from their arrays ------


@dataclass
class FailureSettings:
    """The settings a failure run is recorded with; the front's
    :class:`~dpviz.topics.when_a_replica_fails.run_failure.FailureConfig` adds what the live run alone needs."""
    k: int = 2                  # ranks
    b: int = 16                 # examples per rank per step
    steps: int = 24             # SGD steps
    width: int = 32             # hidden units per layer of the MLP
    depth: int = 2              # hidden layers
    d_in: int = 16              # input features
    lr: float = 0.05            # learning rate η
    momentum: float = 0.9       # μ: the velocity is part of the state a checkpoint must keep
    seed: int = 0               # seeds the data, the model and every batch draw
    dataset_size: int = 512     # examples in the data set
    checkpoint_every: int = 4   # C: steps between two checkpoints

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        self.checkpoint_every = check_int("checkpoint_every", self.checkpoint_every, low=1, high=self.steps)
        check_lr("lr", self.lr)
        self.momentum = check_real("momentum", self.momentum, low=0, high=1, low_open=True)


@dataclass
class Failure:
    """What one kill cost, measured."""
    rank: int                # the rank killed
    step: int                # the step it died in
    named_rank: int          # the rank the launcher named
    notice_seconds: float    # from the kill until the launcher raised, naming it
    checkpoint_step: int     # the step the restart resumed from
    lost_steps: int          # steps done since that checkpoint, done again
    lost_seconds: float      # the time those steps had taken, measured by the victim
    restart_seconds: float   # from the launcher's error until the new ranks began their first step


@dataclass
class Training:
    """A training, through any failures: the loss of every step, the final state, and what each failure cost."""
    config: FailureSettings
    loss: np.ndarray                 # (steps,) each step's loss, averaged over the ranks by the all-reduce
    params: np.ndarray               # (P,) rank 0's θ at the end
    velocity: np.ndarray             # (P,) rank 0's velocity at the end
    step_seconds: np.ndarray         # (n,) measured seconds of each step the final attempts ran (rank 0)
    checkpoint_seconds: np.ndarray   # (m,) measured seconds of every completed save, killed attempts' included
    wall_seconds: float              # the whole training, failures and restarts included, measured here
    failures: list = field(default_factory=list)  # one Failure per kill
    world_size: np.ndarray | None = None  # (steps,) ranks that took each step (carry_on only)
    joined_digests: list = field(default_factory=list)  # per rank of the regrown group: digests of θ and velocity

    @property
    def notice_seconds(self) -> list:
        return [f.notice_seconds for f in self.failures]

    @property
    def lost_steps(self) -> list:
        return [f.lost_steps for f in self.failures]


@dataclass
class YoungDalyCheck:
    """Runs at several checkpoint intervals, each meeting failures at the same rate, and what each lost, measured."""
    config: FailureSettings
    every: np.ndarray             # (n,) C, steps between checkpoints
    mtbf_steps: float             # mean steps of work between failures
    failures: np.ndarray          # (n,) failures each run met
    saves: np.ndarray             # (n,) checkpoints each run completed
    checkpoint_seconds: np.ndarray  # (n,) measured: all its saves together
    lost_seconds: np.ndarray      # (n,) measured: the work its failures undid
    restart_seconds: np.ndarray   # (n,) measured: noticing and restarting, all failures together
    step_seconds: float           # measured: the median step
    save_seconds: float           # measured: the median save (δ)
    trainings: list = field(default_factory=list)  # the Training of each interval

    @property
    def waste(self) -> np.ndarray:
        """Measured seconds lost to checkpoints and redone work (the part τ decides; restarts are not)."""
        return self.checkpoint_seconds + self.lost_seconds

    def interval_steps(self) -> float:
        """Young/Daly's τ* in steps, from this machine's measured δ and step time."""
        return young_daly_interval(self.save_seconds, self.mtbf_steps * self.step_seconds) / self.step_seconds


@dataclass
class DilocoSettings:
    """The settings a DiLoCo run is recorded with; the front's
    :class:`~dpviz.topics.when_a_replica_fails.run_diloco.DilocoConfig` adds what the live run alone needs."""
    k: int = 2                  # ranks
    b: int = 16                 # examples per rank per step
    steps: int = 48             # inner steps
    H: int = 8                  # inner steps between two syncs
    width: int = 32             # hidden units per layer of the MLP
    depth: int = 2              # hidden layers
    d_in: int = 16              # input features
    lr: float = 0.05            # inner learning rate η
    outer_lr: float = 0.7       # η_out, DiLoCo's outer learning rate
    outer_momentum: float = 0.9  # μ, its Nesterov momentum
    fragments: int = 2          # F: streaming DiLoCo syncs one of F fragments of θ every H/F steps
    seed: int = 0               # seeds the data, the model and every batch draw
    dataset_size: int = 512     # examples in the data set

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=10_000)
        self.H = check_int("H", self.H, low=1, high=self.steps)
        check_lr("lr", self.lr)
        self.outer_lr = check_real("outer_lr", self.outer_lr, low=0, high=10, low_open=True)
        self.outer_momentum = check_real("outer_momentum", self.outer_momentum, low=0, high=0.999)
        self.fragments = check_int("fragments", self.fragments, low=1, high=self.H)
        if self.H % self.fragments:
            raise ValueError(f"fragments must divide H={self.H}, so that one fragment syncs every H/F steps; "
                             f"got fragments={self.fragments}.")


@dataclass
class DilocoRun:
    """Plain DP, local SGD, DiLoCo and streaming DiLoCo from one θ0: their losses, θ around every sync, bytes sent."""
    config: DilocoSettings
    loss: dict            # mode -> (steps,) mean over ranks of each step's training loss
    full_loss: dict       # mode -> (steps // H,) the whole data set's loss every H steps (at the synced θ)
    before: dict          # mode -> (syncs, k, P) each rank's θ just before each sync (local, diloco)
    after: dict           # mode -> (syncs, P) the θ every rank holds after each sync
    theta0: np.ndarray    # (P,)
    n_params: int
    sent: dict            # mode -> bytes each rank all-reduced in the whole run, counted in the ranks
    fragment: np.ndarray  # (syncs,) streaming: the fragment each sync sent
    edges: np.ndarray     # (F + 1,) streaming: fragment f is θ[edges[f]:edges[f + 1]]

    @property
    def bytes_per_step(self) -> dict:
        """Bytes each rank all-reduced per inner step, averaged over the run."""
        return {mode: self.sent[mode] / self.config.steps for mode in MODES}

    @property
    def largest_message(self) -> dict:
        """The bytes of the largest single all-reduce of each mode."""
        P = self.n_params
        return {"dp": 4 * P, "local": 4 * P, "diloco": 4 * P, "streaming": 4 * int(np.diff(self.edges).max())}


# --- the record kinds ----------------------------------------------------------------------------------------------

_MODEL = (
    Meta("k", "int", "ranks"),
    Meta("b", "int", "examples per rank per step"),
    Meta("steps", "int", "SGD steps"),
    Meta("width", "int", "hidden units per layer of the MLP"),
    Meta("depth", "int", "hidden layers"),
    Meta("d_in", "int", "input features"),
    Meta("lr", "float", "learning rate η"),
    Meta("seed", "int", "seeds the data, the model and every batch draw"),
    Meta("dataset_size", "int", "examples in the data set"),
)

RESTART = Kind(
    name="replica_restart",
    version=1,
    doc="k ranks trained an MLP with SGD and momentum, checkpointing every C steps; ranks were SIGKILLed at chosen "
        "steps and the job restarted from the last checkpoint; beside it the same training without a failure.",
    arrays=(
        Array("loss_unfailed", ("steps",), "float32", "each step's loss (mean over ranks), the run with no failure"),
        Array("loss_restarted", ("steps",), "float32", "each step's loss kept through the failures and restarts"),
        Array("params_unfailed", ("P",), "float32", "rank 0's θ at the end, no failure"),
        Array("params_restarted", ("P",), "float32", "rank 0's θ at the end, through the failures"),
        Array("velocity_unfailed", ("P",), "float32", "rank 0's momentum velocity at the end, no failure"),
        Array("velocity_restarted", ("P",), "float32", "rank 0's momentum velocity at the end, through the failures"),
        Array("kill_rank", ("failures",), "int64", "the rank SIGKILLed, one per failure"),
        Array("kill_step", ("failures",), "int64", "the step it died in"),
        Array("named_rank", ("failures",), "int64", "the rank the launcher named as dead"),
        Array("checkpoint_step", ("failures",), "int64", "the step the restart resumed from"),
        Array("lost_steps", ("failures",), "int64", "steps done since that checkpoint, done again"),
        Array("notice_seconds", ("failures",), "float64", "seconds from the kill until the launcher named the rank"),
        Array("lost_seconds", ("failures",), "float64", "seconds the undone steps had taken"),
        Array("restart_seconds", ("failures",), "float64",
              "seconds from the launcher's error until the restarted ranks began their first step"),
        Array("checkpoint_seconds", ("saves",), "float64", "seconds of every completed save"),
    ),
    meta=(*_MODEL,
          Meta("momentum", "float", "μ, the momentum the velocity carries"),
          Meta("checkpoint_every", "int", "C, steps between two checkpoints"),
          Meta("wall_seconds", "float", "the whole training through its failures and restarts, measured"),
          *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date")),
)

YOUNG_DALY = Kind(
    name="replica_young_daly",
    version=1,
    doc="One training per checkpoint interval C, each meeting failures drawn at one rate (the same arrivals for "
        "every C), restarted from its last checkpoint: what the checkpoints, the redone work and the restarts cost.",
    arrays=(
        Array("every", ("N",), "int64", "C, steps between checkpoints, one training each"),
        Array("failures", ("N",), "int64", "failures each training met"),
        Array("saves", ("N",), "int64", "checkpoints each training completed"),
        Array("checkpoint_seconds", ("N",), "float64", "measured: all its saves together"),
        Array("lost_seconds", ("N",), "float64", "measured: the work its failures undid"),
        Array("restart_seconds", ("N",), "float64", "measured: noticing and restarting, all its failures together"),
    ),
    meta=(*_MODEL,
          Meta("momentum", "float", "μ, the momentum the velocity carries"),
          Meta("mtbf_steps", "float", "mean steps of work between two failures"),
          Meta("failure_seed", "int", "seeds the failures' arrivals"),
          Meta("step_seconds", "float", "measured: the median step"),
          Meta("save_seconds", "float", "measured: the median save, δ",
               nonfinite="NaN: no run saved, every C being the whole run"),
          *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date")),
)

DILOCO = Kind(
    name="replica_diloco",
    version=1,
    doc="k ranks trained one MLP from the same θ0 on the same batches as plain data parallelism, local SGD, DiLoCo "
        "and streaming DiLoCo; every loss, the whole data set's loss after each H steps, every rank's θ just before "
        "and after each sync, and the bytes each rank all-reduced, counted in the ranks.",
    arrays=(
        Array("loss", (4, "steps"), "float32", "each step's mean training loss, one row per mode (dp, local, diloco, "
                                                "streaming)"),
        Array("full_loss", (4, "syncs"), "float32", "the whole data set's loss every H steps, one row per mode"),
        Array("theta0", ("P",), "float32", "the parameters every mode started from"),
        Array("before_local", ("syncs", "k", "P"), "float32", "every rank's θ just before each local-SGD average"),
        Array("after_local", ("syncs", "P"), "float32", "the θ every rank held after each local-SGD average"),
        Array("before_diloco", ("syncs", "k", "P"), "float32", "every rank's θ just before each DiLoCo sync"),
        Array("after_diloco", ("syncs", "P"), "float32", "the θ after each DiLoCo outer step"),
        Array("before_streaming", ("fsyncs", "k", "P"), "float32", "every rank's θ before each fragment's sync"),
        Array("after_streaming", ("fsyncs", "P"), "float32", "rank 0's θ after each fragment's sync"),
        Array("fragment", ("fsyncs",), "int64", "streaming: the fragment each sync sent"),
        Array("edges", ("F+1",), "int64", "streaming: fragment f is θ[edges[f]:edges[f + 1]]"),
        Array("sent", (4,), "int64", "bytes each rank all-reduced in the whole run, one per mode, counted in the ranks"),
    ),
    meta=(*_MODEL,
          Meta("H", "int", "inner steps between two syncs"),
          Meta("outer_lr", "float", "η_out, DiLoCo's outer learning rate"),
          Meta("outer_momentum", "float", "μ, its Nesterov momentum"),
          Meta("fragments", "int", "F: streaming DiLoCo's fragments of θ"),
          Meta("n_params", "int", "P, the model's parameter count"),
          *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date")),
)


def _config_meta(config, names) -> dict:
    return {name: getattr(config, name) for name in names}


_MODEL_NAMES = tuple(m.name for m in _MODEL)


@register
class RestartRecord(RankRecord):
    """A restart through failures beside the unfailed run; every array of :data:`RESTART` is an attribute."""

    KIND = RESTART

    @classmethod
    def of(cls, run, clean, where: dict) -> RestartRecord:
        """The record of ``run`` (a :class:`Training` through failures) and ``clean`` (the same without one)."""
        f = run.failures
        meta = {**_config_meta(run.config, _MODEL_NAMES + ("momentum", "checkpoint_every")),
                "wall_seconds": float(run.wall_seconds), **where}
        arrays = {
            "loss_unfailed": clean.loss, "loss_restarted": run.loss, "params_unfailed": clean.params,
            "params_restarted": run.params, "velocity_unfailed": clean.velocity, "velocity_restarted": run.velocity,
            "kill_rank": np.array([x.rank for x in f], np.int64), "kill_step": np.array([x.step for x in f], np.int64),
            "named_rank": np.array([x.named_rank for x in f], np.int64),
            "checkpoint_step": np.array([x.checkpoint_step for x in f], np.int64),
            "lost_steps": np.array([x.lost_steps for x in f], np.int64),
            "notice_seconds": np.array([x.notice_seconds for x in f], np.float64),
            "lost_seconds": np.array([x.lost_seconds for x in f], np.float64),
            "restart_seconds": np.array([x.restart_seconds for x in f], np.float64),
            "checkpoint_seconds": np.asarray(run.checkpoint_seconds, np.float64),
        }
        return cls(meta, arrays)

    def describe(self) -> str:
        m = self.meta
        return (f"restart run, k={m['k']}, MLP {m['depth']}×{m['width']}, b={m['b']}, {m['steps']} steps, checkpoint "
                f"every {m['checkpoint_every']}, {len(self.kill_step)} kill(s), {m['backend']}, {m['host']}, "
                f"{m['cores']} cores, {m['date'][:10]}")

    def check(self) -> str:
        """What holds of every restart record: each kill named, each restart from the checkpoint before the kill."""
        if not np.array_equal(self.named_rank, self.kill_rank):
            raise AssertionError(f"the launcher named ranks {self.named_rank.tolist()}; killed were "
                                 f"{self.kill_rank.tolist()}.")
        C = self.meta["checkpoint_every"]
        if not np.array_equal(self.checkpoint_step, (self.kill_step // C) * C):
            raise AssertionError(f"restarts resumed at steps {self.checkpoint_step.tolist()}, not at the last "
                                 f"checkpoint before kills at {self.kill_step.tolist()} (C = {C}).")
        if not np.array_equal(self.lost_steps, self.kill_step - self.checkpoint_step):
            raise AssertionError(f"lost steps {self.lost_steps.tolist()} are not the kills' steps minus the checkpoints'.")
        return f"{len(self.kill_step)} failure(s), each named and restarted from the checkpoint before it."

    def trainings(self) -> tuple:
        """(the run through failures, the unfailed run) as the claims read them."""
        config = FailureSettings(**_config_meta(self, _MODEL_NAMES + ("momentum", "checkpoint_every")))
        failures = [Failure(int(r), int(s), int(n), float(t), int(c), int(lost), float(ls), float(rs)) for
                    r, s, n, t, c, lost, ls, rs in zip(self.kill_rank, self.kill_step, self.named_rank,
                                                       self.notice_seconds, self.checkpoint_step, self.lost_steps,
                                                       self.lost_seconds, self.restart_seconds)]
        run = Training(config, self.loss_restarted, self.params_restarted, self.velocity_restarted, np.zeros(0),
                       self.checkpoint_seconds, float(self.meta["wall_seconds"]), failures)
        clean = Training(config, self.loss_unfailed, self.params_unfailed, self.velocity_unfailed, np.zeros(0),
                         np.zeros(0), float("nan"))
        return run, clean


@register
class YoungDalyRecord(RankRecord):
    """Trainings at several checkpoint intervals meeting failures at one rate; arrays of :data:`YOUNG_DALY`."""

    KIND = YOUNG_DALY

    @classmethod
    def of(cls, check, where: dict, *, failure_seed: int) -> YoungDalyRecord:
        """The record of a :class:`YoungDalyCheck` whose failures ``failure_seed`` drew."""
        meta = {**_config_meta(check.config, _MODEL_NAMES + ("momentum",)), "mtbf_steps": float(check.mtbf_steps),
                "failure_seed": int(failure_seed), "step_seconds": float(check.step_seconds),
                "save_seconds": float(check.save_seconds), **where}
        arrays = {"every": np.asarray(check.every, np.int64), "failures": np.asarray(check.failures, np.int64),
                  "saves": np.asarray(check.saves, np.int64),
                  **{name: np.asarray(getattr(check, name), np.float64)
                     for name in ("checkpoint_seconds", "lost_seconds", "restart_seconds")}}
        return cls(meta, arrays)

    def describe(self) -> str:
        m = self.meta
        every = ", ".join(map(str, self.every.tolist()))
        return (f"Young/Daly check, k={m['k']}, {m['steps']} steps, C = {every}, a failure per {m['mtbf_steps']:g} "
                f"steps, {m['backend']}, {m['host']}, {m['cores']} cores, {m['date'][:10]}")

    @property
    def waste(self) -> np.ndarray:
        """(N,) measured seconds lost to checkpoints and redone work at each C."""
        return self.checkpoint_seconds + self.lost_seconds

    def young_daly_check(self):
        """The :class:`YoungDalyCheck` the claims read."""
        config = FailureSettings(**_config_meta(self, _MODEL_NAMES + ("momentum",)))
        return YoungDalyCheck(config, self.every, float(self.meta["mtbf_steps"]), self.failures, self.saves,
                              self.checkpoint_seconds, self.lost_seconds, self.restart_seconds,
                              float(self.meta["step_seconds"]), float(self.meta["save_seconds"]))


@register
class DilocoRecord(RankRecord):
    """Plain DP, local SGD, DiLoCo and streaming DiLoCo on the same batches; arrays of :data:`DILOCO`."""

    KIND = DILOCO

    @classmethod
    def of(cls, run, where: dict) -> DilocoRecord:
        """The record of a :class:`DilocoRun`."""
        c = run.config
        meta = {**_config_meta(c, _MODEL_NAMES + ("H", "outer_lr", "outer_momentum", "fragments")),
                "n_params": int(run.n_params), **where}
        arrays = {"loss": np.stack([run.loss[m] for m in MODES]).astype(np.float32),
                  "full_loss": np.stack([run.full_loss[m] for m in MODES]).astype(np.float32),
                  "theta0": run.theta0, "fragment": np.asarray(run.fragment, np.int64),
                  "edges": np.asarray(run.edges, np.int64),
                  "sent": np.array([run.sent[m] for m in MODES], np.int64)}
        for m in ("local", "diloco", "streaming"):
            arrays[f"before_{m}"], arrays[f"after_{m}"] = run.before[m], run.after[m]
        return cls(meta, arrays)

    def describe(self) -> str:
        m = self.meta
        return (f"DiLoCo run, k={m['k']}, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), b={m['b']}, "
                f"{m['steps']} steps, H = {m['H']}, F = {m['fragments']}, {m['backend']}, {m['host']}, "
                f"{m['cores']} cores, {m['date'][:10]}")

    def bytes_per_step(self) -> dict:
        """Bytes each rank all-reduced per inner step, by mode."""
        return {m: int(self.sent[i]) / self.meta["steps"] for i, m in enumerate(MODES)}

    def synced_steps(self) -> np.ndarray:
        """(syncs,) the steps after which the whole data set's loss was measured: H, 2H, ..."""
        return self.meta["H"] * np.arange(1, self.full_loss.shape[1] + 1)

    def diloco_run(self):
        """The :class:`DilocoRun` the claims read."""
        config = DilocoSettings(**_config_meta(self, _MODEL_NAMES + ("H", "outer_lr", "outer_momentum", "fragments")))
        rows = dict(zip(MODES, range(len(MODES))))
        return DilocoRun(config, {m: self.loss[i] for m, i in rows.items()},
                         {m: self.full_loss[i] for m, i in rows.items()},
                         {m: getattr(self, f"before_{m}") for m in MODES[1:]},
                         {m: getattr(self, f"after_{m}") for m in MODES[1:]}, self.theta0, int(self.meta["n_params"]),
                         {m: int(self.sent[i]) for m, i in rows.items()}, self.fragment, self.edges)


CARRY_ON = Kind(
    name="replica_carry_on",
    version=1,
    doc="k ranks trained an MLP with SGD and momentum; one was SIGKILLed, the k − 1 survivors carried on from the "
        "state they held (its shard dropped), and later a newcomer joined by broadcast; beside it the same training "
        "with no failure.",
    arrays=(
        Array("loss_unfailed", ("steps",), "float32", "each step's loss (mean over ranks), k ranks, no failure"),
        Array("loss_carry_on", ("steps",), "float32", "each step's loss through the shrink and the regrow"),
        Array("world_size", ("steps",), "int64", "ranks that took each step"),
        Array("joined_digests", ("k", 2), "str", "per rank of the regrown group: digests of θ and of the velocity"),
    ),
    meta=(*_MODEL,
          Meta("momentum", "float", "μ, the momentum the velocity carries"),
          Meta("kill_rank", "int", "the rank SIGKILLed"),
          Meta("kill_step", "int", "the step it died in"),
          Meta("named_rank", "int", "the rank the launcher named as dead"),
          Meta("regrow_at", "int", "the step the newcomer joined at"),
          Meta("lr_rule", "str", "the learning rate while the group was smaller: linear ((k − 1)/k of η) or same"),
          Meta("notice_seconds", "float", "seconds from the kill until the launcher named the rank"),
          Meta("restart_seconds", "float", "seconds from then until the smaller group began its first step"),
          *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date")),
)


@register
class CarryOnRecord(RankRecord):
    """A group that shrank and regrew, beside the unfailed run; arrays of :data:`CARRY_ON`."""

    KIND = CARRY_ON

    @classmethod
    def of(cls, run, clean, where: dict, *, regrow_at: int, lr_rule: str) -> CarryOnRecord:
        """The record of ``run`` (:func:`~dpviz.topics.when_a_replica_fails.run_failure.record_carry_on`'s) and
        ``clean`` (the same k ranks without a failure)."""
        f = run.failures[0]
        meta = {**_config_meta(run.config, _MODEL_NAMES + ("momentum",)), "kill_rank": int(f.rank),
                "kill_step": int(f.step), "named_rank": int(f.named_rank), "regrow_at": int(regrow_at),
                "lr_rule": lr_rule, "notice_seconds": float(f.notice_seconds),
                "restart_seconds": float(f.restart_seconds), **where}
        arrays = {"loss_unfailed": clean.loss, "loss_carry_on": run.loss,
                  "world_size": np.asarray(run.world_size, np.int64),
                  "joined_digests": np.array(run.joined_digests, dtype=str)}
        return cls(meta, arrays)

    def describe(self) -> str:
        m = self.meta
        return (f"carry-on run, k={m['k']}, MLP {m['depth']}×{m['width']}, b={m['b']}, {m['steps']} steps, rank "
                f"{m['kill_rank']} killed at step {m['kill_step']}, a newcomer at step {m['regrow_at']}, "
                f"{m['backend']}, {m['host']}, {m['cores']} cores, {m['date'][:10]}")

    def training(self):
        """The :class:`Training` the claims read."""
        m = self.meta
        config = FailureSettings(**_config_meta(self, _MODEL_NAMES + ("momentum",)))
        failure = Failure(m["kill_rank"], m["kill_step"], m["named_rank"], m["notice_seconds"], m["kill_step"], 0,
                          0.0, m["restart_seconds"])
        return Training(config, self.loss_carry_on, np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0),
                        np.zeros(0), float("nan"), [failure], self.world_size,
                        [list(d) for d in self.joined_digests.tolist()])
