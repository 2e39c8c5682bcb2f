"""Where and how a run ran: the metadata fields a record kind declares from ``dpviz.engine.schema.RAN_ON``.

    from dpviz.engine.where import where_it_ran
    meta = dict(k=config.k, ..., **where_it_ran(ZeroRun, backend="gloo", threads_per_rank=results[0]["threads"]))

The kind's declaration says which of the fields it holds; this fills exactly those, each the same way
in every kind, so a run module never types a host name, a date format or a core count itself.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import time

from dpviz.engine.schema import RAN_ON, Kind
from dpviz.engine.launch import cpu_count

DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # local time with its UTC offset, e.g. 2026-11-30T17:34:49+0000
HOST_ENV = "DPVIZ_HOST_NAME"  # set it (to "anonymous", say) to record that name instead of this machine's


def host_name() -> str:
    """The host name a record keeps: ``$DPVIZ_HOST_NAME`` where it is set (a shared record need not name
    the laptop it came from), else this machine's name."""
    return os.environ.get(HOST_ENV, "").strip() or socket.gethostname()


def where_it_ran(kind, *, backend=None, device=None, threads_per_rank=None) -> dict:
    """The where-it-ran metadata that ``kind`` (a :class:`~dpviz.engine.schema.Kind` or a record class) declares.

    ``backend``, ``device`` and ``threads_per_rank`` are what only the run knows: pass each one the kind
    declares, and no other. The rest are read here: torch's version (from its installed metadata,
    so this process need not import torch), the host name, the operating system,
    the cores this process may use (:func:`dpviz.engine.launch.cpu_count`) and the date. The host name is
    :func:`host_name`'s: set ``DPVIZ_HOST_NAME=anonymous`` to keep this machine's name out of every record.
    """
    kind = kind if isinstance(kind, Kind) else kind.KIND
    declared = [m.name for m in kind.meta if m.name in RAN_ON]
    known = {"backend": backend, "device": device, "threads_per_rank": threads_per_rank}
    for name, value in known.items():
        if value is None and name in declared:
            raise TypeError(f"a {kind.name!r} record declares {name!r}: pass {name}= to where_it_ran.")
        if value is not None and name not in declared:
            raise TypeError(f"a {kind.name!r} record does not declare {name!r}: pass {name}= only for kinds that do.")
    known.update(torch_version=importlib.metadata.version("torch"), host=host_name(), platform=platform.platform(),
                 cores=cpu_count(), date=time.strftime(DATE_FORMAT))
    return {name: known[name] for name in declared}
