"""Self-check cards for measuring an all-reduce: the two bandwidths a benchmark prints, fitting α and β, and when
to trust them."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.ground_floor import costmodel

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def benchmark_bandwidths(M, ms, k):
    """algbw and busbw, in GB/s, of an all-reduce of M bytes over k ranks that took ms milliseconds."""
    seconds = ms / 1e3
    return {"algbw": M / seconds / 1e9, "busbw": costmodel.bus_bandwidth(M, seconds, k) / 1e9}


CARDS = (
    Card(
        "An all-reduce of {M:,.0f} bytes over k = {k} GPUs took {ms:g} ms. What algbw and busbw does a benchmark "
        "print, and which of the two do you compare with a link's β?",
        "algbw = M / T = {algbw:.3g} GB/s, what the application sees. busbw = algbw · 2(k−1)/k = {busbw:.3g} GB/s: "
        "the ring makes every GPU send 2(k−1)/k · M bytes, so busbw is what each link carried per second, and "
        "that is the number to set beside β (and to compare across k).",
        "numeric", HERE, f"{TOPIC}-num-busbw",
        compute=benchmark_bandwidths, params={"M": 1_000_000_000, "ms": 20.0, "k": 8},
    ),
    Card(
        "A fit to all-reduce times of 4 KiB to 4 MiB gives β = 23 GB/s, but the 4 MiB message took no longer "
        "than the 4 KiB one. What is wrong with reading 23 GB/s as the link's bandwidth?",
        "Times that do not rise with M never showed the bandwidth term, so β is whatever the noise gives. "
        "Trust β only when the times rise with M over the fitted range, the largest message's transfer "
        "term is at least half its time, and the model follows the points (a median error within 20 %); "
        "this chapter checks all three and draws the residuals under the fit.",
        "spot the error", HERE, f"{TOPIC}-trust-fit",
    ),
    Card(
        "On a small virtual machine, why fit α and β to the fastest of the repeats at each size, not to the median?",
        "The model prices moving the bytes. Some calls also wait for a late wake-up of the process the message is "
        "for, milliseconds on a call that otherwise takes a fraction of one, and that hits a different share of "
        "the calls at each size, so the median jumps and no line follows it. The fastest call is the one no late "
        "wake-up reached.",
        "why", HERE, f"{TOPIC}-fastest",
    ),
    Card(
        "Fitted to the same k = 2 times, the notes' formula and the ring formula draw the same line. What differs, "
        "and can k = 2 timings tell which formula is right?",
        "At k = 2 the notes give α + M/(2β) and the ring 2α + M/β: the same curve with α and β both off by a "
        "factor of 2. So the fits agree on the line and differ by exactly 2 in α and in β; k = 2 timings cannot "
        "decide. Counting the bytes the ring sends does: 2(k−1)/k · M per rank, twice the notes' term.",
        "self-check", HERE, f"{TOPIC}-k2-same-line",
    ),
    Card(
        "Fitted to published nccl-tests times, real GPU systems give α of a few µs, several times the NVLink "
        "preset's 0.47 µs. Why?",
        "A real all-reduce also pays for launching work on the GPUs and for NCCL's synchronisation between "
        "steps, and a fit charges everything that does not grow with M to α. The preset is the link alone.",
        "why", HERE, f"{TOPIC}-gpu-alpha",
    ),
    Card(
        "On the two-node H100 system, the points between about 1 MB and a few hundred MB sit above the fitted "
        "line, up to four times. Is the α-β model wrong?",
        "It is a simplification: NCCL changes algorithm and protocol with the message size, and no single "
        "(α, β) pair follows every regime. The two ends of the range, a latency floor and a bandwidth slope, "
        "still fit, and the residual panel shows plainly where the line misses.",
        "self-check", HERE, f"{TOPIC}-regimes",
    ),
)
