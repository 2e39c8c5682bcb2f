"""The record of an overlap run: the same training steps synced five ways, with every bucket's all-reduce timed.

Written by :func:`dpviz.topics.waiting.run_overlap.record_overlap`. In each *mode* the k ranks train the same
MLP from the same θ0 on the same batches, and sync the gradients differently:

* ``serial``: backward first, then one blocking all-reduce of the flat gradient (what s01 assumes);
* ``per_parameter``: each parameter's gradient all-reduced (async) the moment backward produces it;
* ``one_buffer``: every gradient copied into one flat buffer, all-reduced (async) once the last arrives;
* ``buckets``: buffers of a chosen size, filled in the order backward produces gradients, each
  all-reduced (async) as soon as it is full, as DistributedDataParallel does;
* ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` itself, with a comm hook that only times its
  default all-reduce.

Times are seconds after the start of each step's forward pass, on each rank's own clock. Buckets
are padded to the mode with the most (absent ones are NaN, 0 bytes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpviz.engine.checks import check_choice
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register

SHIPPED = "waiting_overlap_k2"

MODES = ("serial", "per_parameter", "one_buffer", "buckets", "ddp")
MODE_WORDS = {
    "serial": "no overlap: backward, then one all-reduce",
    "per_parameter": "one async all-reduce per parameter",
    "one_buffer": "one flat buffer, sent when full",
    "buckets": "buckets, each sent when full",
    "ddp": "torch DistributedDataParallel",
}
ORDER_TOLERANCE = 1e-6  # relative, mode against serial; only where the summation order may differ (k > 2): see OverlapRecord.check

KIND = Kind(
    name="overlap",
    version=1,
    doc="k ranks trained the same MLP from the same θ0 on the same batches, syncing gradients five ways "
        "(serial, per parameter, one buffer, buckets, DDP); every bucket's all-reduce timed against the backward pass, "
        "and each way's gradients compared with the serial all-reduce's.",
    arrays=(
        Array("mode", ("R",), "str", "the way of syncing, one of serial, per_parameter, one_buffer, buckets, ddp"),
        Array("n_buckets", ("R",), "int64",
              "all-reduce calls per step in each mode (the most in any step: DDP rebuilds its buckets after the first)"),
        Array("bucket_bytes", ("R", "Bmax"), "int64", "bytes in each bucket of the last step, in the order they were sent (0: none)"),
        Array("t_forward_end", ("R", "steps", "k"), "float64", "when the forward pass ended, seconds after the step began"),
        Array("t_grads_ready", ("R", "steps", "k"), "float64",
              "when backward produced the last parameter's gradient, seconds after the step began"),
        Array("t_synced", ("R", "steps", "k"), "float64",
              "when every averaged gradient was in place, seconds after the step began"),
        Array("t_step_end", ("R", "steps", "k"), "float64", "when the optimizer step ended, seconds after the step began"),
        Array("comm_start", ("R", "steps", "k", "Bmax"), "float64", "when each bucket's all-reduce was started (NaN: no bucket)", nonfinite="NaN: no bucket"),
        Array("comm_end", ("R", "steps", "k", "Bmax"), "float64", "when each bucket's all-reduce completed (NaN: no bucket)", nonfinite="NaN: no bucket"),
        Array("grad_digest", ("R", "steps", "k"), "bytes", "SHA-1 (hex) of the averaged gradient's bytes each rank stepped with"),
        Array("grad_rel_diff", ("R", "steps", "k"), "float64",
              "max |g − g_serial| / max |g_serial| against the serial mode's gradient at the same step"),
        Array("grad_head", ("R", 4), "float32", "the first four entries of rank 0's averaged gradient at step 0"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("steps", "int", "steps recorded per mode"),
        Meta("warmup", "int", "the first steps of each mode left out of medians (first calls, DDP's bucket rebuild)"),
        Meta("width", "int", "hidden units per layer of the MLP"),
        Meta("depth", "int", "hidden layers"),
        Meta("d_in", "int", "input features"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("n_tensors", "int", "parameter tensors (weights and biases)"),
        Meta("message_bytes", "int", "M, bytes of the whole gradient (P × 4)"),
        Meta("bucket_cap_bytes", "int", "the bucket size asked for in the buckets and ddp modes, bytes"),
        Meta("b", "int", "examples per rank per step"),
        Meta("lr", "float", "learning rate η of the SGD steps"),
        Meta("seed", "int", "seeds the data and the model"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


@register
class OverlapRecord(RankRecord):
    """An overlap run; medians per mode and the gradient checks come from the recorded arrays."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        return (
            f"overlap run, k={m['k']}, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters, "
            f"M = {m['message_bytes'] / 2**20:.2f} MiB), b={m['b']}, {m['steps']} steps per mode, buckets of "
            f"{m['bucket_cap_bytes'] / 2**20:g} MiB, {m['backend']}, {m['threads_per_rank']} thread(s) per rank, "
            f"{m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    def index(self, mode: str) -> int:
        check_choice("mode", mode, tuple(self.mode.tolist()))
        return int(np.flatnonzero(self.mode == mode)[0])

    def _median(self, array: np.ndarray, mode: str) -> float:
        return float(np.median(array[self.index(mode), int(self.meta["warmup"]):]))

    def phases(self, mode: str) -> dict:
        """Median seconds of one step in ``mode`` over the kept steps and all ranks.

        ``forward``; ``backward`` (until the last gradient exists); ``exposed`` (from then until every
        averaged gradient is in place: the sync nobody hid); ``comm`` (the all-reduces' own spans, added
        up, overlapping or not); ``optimizer``; ``step`` (all of it).
        """
        r, w = self.index(mode), int(self.meta["warmup"])
        comm = np.nansum(self.comm_end[r, w:] - self.comm_start[r, w:], axis=-1)
        return {
            "forward": self._median(self.t_forward_end, mode),
            "backward": self._median(self.t_grads_ready - self.t_forward_end, mode),
            "exposed": self._median(self.t_synced - self.t_grads_ready, mode),
            "comm": float(np.median(comm)),
            "optimizer": self._median(self.t_step_end - self.t_synced, mode),
            "step": self._median(self.t_step_end, mode),
        }

    def typical_step(self, mode: str, rank: int = 0) -> int:
        """The kept step of ``mode`` whose duration on ``rank`` is the median one (the one to draw)."""
        r, w = self.index(mode), int(self.meta["warmup"])
        times = self.t_step_end[r, w:, rank]
        return w + int(np.argsort(times)[len(times) // 2])

    def grads_bit_identical(self) -> np.ndarray:
        """(R,) True where every step's gradient on every rank has the serial mode's exact bytes."""
        serial = self.grad_digest[self.index("serial")]
        return (self.grad_digest == serial[None]).all(axis=(1, 2))

    def check(self) -> str:
        """Assert what the chapter claims on this run and return a one-line report.

        Each mode's gradients equal the serial all-reduce's. With k = 2 they must be equal bit for bit:
        each element is the sum of two numbers, and a + b = b + a exactly, whatever the bucketing, and
        DDP's division by 2 before the sum is exact too. With k > 2 the ring adds three or more numbers
        in an order that depends on where the buffer is cut into chunks, and floating-point addition is
        not associative, so there only a relative difference up to 1e-6 is asserted.
        """
        identical = self.grads_bit_identical()
        worst = self.grad_rel_diff.max(axis=(1, 2))
        if self.k <= 2:
            bad = [m for m, same in zip(self.mode, identical) if not same]
            assert not bad, f"mode {bad[0]} gave gradients that differ from the serial all-reduce's in the last bits"
            words = f"every mode's gradients were bit-identical to the serial all-reduce's at all {self.meta['steps']} steps"
        else:
            bad = [m for m, err in zip(self.mode, worst) if err > ORDER_TOLERANCE]
            assert not bad, f"mode {bad[0]} gave gradients {worst.max():.1e} (relative) away from the serial all-reduce's"
            words = (f"every mode's gradients matched the serial all-reduce's to {worst.max():.1e} (relative; k={self.k} sums "
                     f"in a bucket-dependent order, and rounding differs)")
        serial = self.phases("serial")["step"]
        gains = ", ".join(f"{m}: {self.phases(m)['step'] / serial:.2f}×" for m in self.mode if m != "serial")
        return f"k={self.k}: {words}; median step time against serial: {gains}."


def shipped_overlap(records_dir=SHIPPED_DIR) -> OverlapRecord:
    """The shipped overlap run: k = 2 ranks, every mode, 12 steps each."""
    path = Path(records_dir) / SHIPPED
    if not path.with_suffix(".json").is_file():
        raise FileNotFoundError(
            f"path {str(path)!r}.json does not exist; record the shipped runs with `python -m dpviz.topics.waiting.run_figures`."
        )
    return OverlapRecord.load(path)
