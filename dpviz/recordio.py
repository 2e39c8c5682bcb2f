"""Save and load records as a plain ``.npz`` of arrays plus a ``.json`` of metadata.

Both files share a stem: ``save_record("runs/step5", ...)`` writes
``runs/step5.npz`` and ``runs/step5.json``. Nothing is pickled, so numpy alone
(``np.load(path, allow_pickle=False)`` and ``json.load``) reads a record.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np


def stem(path) -> Path:
    """The path without a ``.npz`` or ``.json`` suffix."""
    path = Path(path)
    return path.with_suffix("") if path.suffix in (".npz", ".json") else path


def save_record(path, kind: str, schema_version: int, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``<stem>.npz`` and ``<stem>.json``; returns the stem."""
    base = stem(path)
    base.parent.mkdir(parents=True, exist_ok=True)
    header = {"kind": kind, "schema_version": schema_version, "arrays": sorted(arrays), "meta": meta}
    np.savez_compressed(base.with_suffix(".npz"), **arrays)
    base.with_suffix(".json").write_text(json.dumps(header, indent=1, sort_keys=True) + "\n")
    return base


def load_record(path, kind: str, schema_version: int) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a record written by :func:`save_record`; raise one sentence naming the path if it is unusable."""
    base = stem(path)
    json_path, npz_path = base.with_suffix(".json"), base.with_suffix(".npz")
    for p in (json_path, npz_path):
        if not p.is_file():
            raise FileNotFoundError(f"path {str(p)!r} does not exist; a {kind} record needs both {base}.json and {base}.npz.")
    try:
        header = json.loads(json_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"path {str(json_path)!r} is truncated or not JSON ({e.msg if hasattr(e, 'msg') else e}).") from None
    if header.get("kind") != kind or header.get("schema_version") != schema_version:
        raise ValueError(
            f"path {str(json_path)!r} holds a {header.get('kind')!r} record of schema_version "
            f"{header.get('schema_version')!r}; this dpviz reads {kind!r} records of schema_version {schema_version}."
        )
    try:
        with np.load(npz_path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in header["arrays"]}
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError) as e:
        raise ValueError(f"path {str(npz_path)!r} is truncated or damaged and cannot be read ({type(e).__name__}).") from None
    return header["meta"], arrays
