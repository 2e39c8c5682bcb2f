"""The record of a hand-written all-reduce's schedule: who sent which chunk to whom, and what it gave.

Written by :func:`dpviz.topics.all_reduce.run_schedule.record_schedule`; drawn by the Step 5 figures. E is the
number of transfers, n the elements of each rank's tensor, C the number of chunks.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register

KIND = Kind(
    name="schedule",
    version=1,
    doc="k real ranks all-reduced a tensor by hand (the ring, or a parameter server) and with dist.all_reduce; "
        "every transfer, each rank's tensor before and after, and whether the two results agree bit for bit.",
    arrays=(
        Array("phase", ("E",), "int64", "the transfer's phase, an index into the metadata's phases"),
        Array("step", ("E",), "int64", "the step within its phase"),
        Array("src", ("E",), "int64", "the sending rank"),
        Array("dst", ("E",), "int64", "the receiving rank"),
        Array("chunk", ("E",), "int64", "which chunk of the tensor travelled"),
        Array("bytes", ("E",), "int64", "bytes in the transfer"),
        Array("bytes_sent", ("k",), "int64", "bytes each rank sent, as the collective counted them"),
        Array("bytes_received", ("k",), "int64", "bytes each rank received, from the transfers"),
        Array("chunk_sizes", ("C",), "int64", "elements per chunk"),
        Array("inputs", ("k", "n_elements"), "float32", "each rank's tensor before the all-reduce"),
        Array("results", ("k", "n_elements"), "float32", "each rank's tensor after the hand-written all-reduce"),
        Array("all_reduce", ("k", "n_elements"), "float32", "each rank's tensor after dist.all_reduce of the same input"),
    ),
    meta=(
        Meta("impl", "str", "\"ring\" or \"parameter_server\""),
        Meta("k", "int", "ranks"),
        Meta("n_elements", "int", "elements in each rank's tensor"),
        Meta("element_bytes", "int", "bytes per element"),
        Meta("message_bytes", "int", "M, bytes in each rank's tensor"),
        Meta("phases", "list", "the phase names in order (reduce-scatter, all-gather; or push, pull)"),
        Meta("equal", "bool", "every rank's result equals dist.all_reduce's bit for bit"),
        Meta("max_abs_diff", "float", "the largest difference between the two"),
        Meta("seed", "int", "seeds the tensors"),
        *ran_on("backend", "host", "cores", "torch_version", "date"),
    ),
)


@register
class Schedule(Record):
    """A recorded hand-written all-reduce; ``entries`` lists its transfers in order."""

    KIND = KIND

    @property
    def entries(self) -> list[dict]:
        """Every transfer as {phase, step, src, dst, chunk, bytes}, ordered by phase, step and sender."""
        names = self.phases
        cols = zip(self.arrays["phase"], self.step, self.src, self.dst, self.chunk, self.arrays["bytes"])
        return [dict(phase=names[p], step=int(s), src=int(a), dst=int(b), chunk=int(c), bytes=int(n)) for p, s, a, b, c, n in cols]

    def describe(self) -> str:
        m = self.meta
        name = "ring" if m["impl"] == "ring" else "parameter server"
        return (f"{name} all-reduce, k={m['k']}, M={m['message_bytes']} bytes, {m['backend']}, "
                f"{m['host']}, {m['cores']} cores, {m['date'][:10]}")

    @classmethod
    def from_entries(cls, entries: list[dict], meta: dict, **arrays) -> "Schedule":
        """Build the record from transfer dicts (as the ranks wrote them down) and the other arrays."""
        index = {name: i for i, name in enumerate(meta["phases"])}
        columns = {
            "phase": [index[e["phase"]] for e in entries],
            **{key: [e[key] for e in entries] for key in ("step", "src", "dst", "chunk", "bytes")},
        }
        arrays.update({key: np.asarray(col, dtype=np.int64).reshape(-1) for key, col in columns.items()})
        return cls(meta, arrays)
