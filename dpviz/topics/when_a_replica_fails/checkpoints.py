"""A checkpoint on disk, written all or nothing: a temporary file beside it, flushed to disk, then renamed into place.

    save_checkpoint(folder, step=8, arrays={"params": theta, "velocity": v, "loss": losses})
    ckpt = load_checkpoint(folder)          # None when no checkpoint was ever completed

A rank killed in the middle of a save leaves the previous checkpoint as it was: ``os.replace`` swaps a whole file
for a whole file, and the half-written temporary (``.tmp-<pid>``) is never read. This is the same rule as the
course's records (:meth:`dpviz.engine.schema.Record.save`), in its smallest form. numpy only: the front reads what
the ranks wrote without importing torch.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

NAME = "checkpoint.npz"


def save_checkpoint(folder, *, step: int, arrays: dict) -> Path:
    """Write ``arrays`` and ``step`` (the number of steps taken so far) as the folder's checkpoint, atomically."""
    folder = Path(folder)
    final = folder / NAME
    tmp = folder / f"{NAME}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            np.savez(f, step=np.int64(step), **arrays)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the name points at them
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final


def load_checkpoint(folder) -> dict | None:
    """The last completed checkpoint as {"step": int, name: array}, or None if there is none."""
    path = Path(folder) / NAME
    if not path.exists():
        return None
    with np.load(path) as z:
        out = {name: z[name] for name in z.files}
    out["step"] = int(out["step"])
    return out


def leftovers(folder) -> list[str]:
    """Temporary files of saves that never finished (a rank killed mid-save leaves one; it is never read)."""
    return sorted(p.name for p in Path(folder).glob(f"{NAME}.tmp-*"))


def remove_leftovers(folder) -> list[str]:
    """Delete the temporaries :func:`leftovers` lists, before a restart; return their names."""
    names = leftovers(folder)
    for name in names:
        (Path(folder) / name).unlink(missing_ok=True)
    return names
