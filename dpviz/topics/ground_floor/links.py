"""α and β for three common interconnects, each from a cited source, to set beside this machine's measured ones.

α is the latency of one step of a ring (one message to a neighbour), β the bandwidth of one link in one
direction. β comes from vendor or standard specifications. α comes from NCCL's own tuning model, whose
per-step hardware latencies for a ring are ``hwLat`` in NVIDIA/nccl src/graph/tuning.cc (read at commit
01afd20, the NCCL 2.7 series: NVLink 0.47 µs, network 2.7 µs, for its low-latency protocol), and for
Ethernet from a published kernel TCP ping-pong between two 10 GbE NICs. They are good to a small factor:
enough to show how the link moves the speedup curve, not to predict a particular cluster. The faster link
is faster in both α and β (a test checks it). Figures draw them fast to slow in mint, butter and coral.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpviz.engine.checks import check_real


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
            alpha=17.8e-6,
            beta=1.25e9,
            source="β: 10GBASE line rate 10 Gb/s = 1.25 GB/s (IEEE 802.3ae); α: kernel TCP ping-pong, 17.8 µs half "
            "round trip between two directly connected 10 GbE NICs (sockperf; github.com/F-Stack/f-stack/issues/540)",
        ),
        Link(
            "100 Gb InfiniBand",
            alpha=2.7e-6,
            beta=12.5e9,
            source="β: InfiniBand EDR 4x, 100 Gb/s = 12.5 GB/s per direction (IBTA); α: NCCL's per-step ring latency "
            "over the network, 2.7 µs (NVIDIA/nccl src/graph/tuning.cc, hwLat NET/Ring/LL)",
        ),
        Link(
            "NVLink",
            alpha=0.47e-6,
            beta=300e9,
            source="β: NVIDIA A100 NVLink 3, 600 GB/s per GPU both ways = 300 GB/s each way (A100 datasheet); "
            "α: NCCL's per-step ring latency over NVLink, 0.47 µs (NVIDIA/nccl src/graph/tuning.cc, hwLat NVLINK/Ring/LL)",
        ),
    )
}

# Fast to slow, the order in which figures take mint, butter and coral.
SPEED_ORDER = ("NVLink", "100 Gb InfiniBand", "10 Gb Ethernet")
