"""Nominal alpha, beta for three common interconnects, to set beside this machine's measured ones.

The numbers are round figures from vendor specifications and widely quoted measurements, good to
an order of magnitude: enough to show how the link moves the speedup curve, not to predict a
particular cluster. Figures draw them fast to slow in mint, butter and coral.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpviz.checks import check_real


@dataclass(frozen=True)
class Link:
    """One interconnect as the cost model sees it."""

    name: str
    alpha: float  # seconds, latency of one message
    beta: float  # bytes per second, in one direction
    source: str  # where the numbers come from

    def __post_init__(self):
        check_real("alpha", self.alpha, low=0.0)
        check_real("beta", self.beta, low=0.0, low_open=True)


PRESETS = {
    link.name: link
    for link in (
        Link(
            "10 Gb Ethernet",
            alpha=25e-6,
            beta=1.25e9,
            source="nominal: 10GBASE line rate 10 Gb/s = 1.25 GB/s (IEEE 802.3ae); TCP latency ~10-50 µs",
        ),
        Link(
            "100 Gb InfiniBand",
            alpha=1.5e-6,
            beta=12.5e9,
            source="nominal: InfiniBand EDR 4x, 100 Gb/s = 12.5 GB/s; MPI latency ~1-2 µs",
        ),
        Link(
            "NVLink",
            alpha=3e-6,
            beta=300e9,
            source="nominal: NVIDIA A100 NVLink3, 600 GB/s per GPU both ways = 300 GB/s each way; "
            "NCCL latency a few µs",
        ),
    )
}

# Fast to slow, the order in which figures take mint, butter and coral.
SPEED_ORDER = ("NVLink", "100 Gb InfiniBand", "10 Gb Ethernet")
