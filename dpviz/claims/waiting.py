"""Waiting (stragglers, overlap, asynchronous SGD): what the chapter's figures rest on, asserted on their records."""

from __future__ import annotations

import numpy as np


def figure_claims(records: dict) -> str:
    """The chapter's claims, asserted on the figure records; one line for the terminal."""
    lines = [records["waiting_straggler"].check(), records["waiting_overlap"].check(),
             records["waiting_async"].check(), records["waiting_sync"].check()]
    async_run, sync_run = records["waiting_async"], records["waiting_sync"]
    assert not np.array_equal(async_run.theta_after[sync_run.updates * async_run.k - 1], sync_run.theta_after[-1])
    return "waiting: " + " ".join(lines)

