"""How a record kind is declared, written, read and checked: one table per kind, everything else from it.

A record is two files with one stem: ``NAME.npz`` (the arrays) and ``NAME.json``
(the kind, its schema version, the array names and the metadata). Nothing is
pickled, so numpy alone reads one::

    import json, numpy as np
    header = json.load(open("runs/k4.json"))     # {"kind": "run", "schema_version": 2, "arrays": [...], "meta": {...}}
    arrays = np.load("runs/k4.npz", allow_pickle=False)

A kind declares its arrays once, as :class:`Array` rows (name, shape in symbols,
dtype, meaning) and its metadata as :class:`Meta` rows. From that one table come
the writer (:meth:`Record.save`), the reader (:func:`load`), the validity check
(:meth:`Kind.validate`), the attribute of each array on the record class, and the
record reference's tables, docs/records.md (:meth:`Kind.markdown`).

Shapes are written in symbols: ``("steps", "k", "P")``. A symbol that names a
metadata field (``k``, ``steps``) takes its value from the metadata; any other
symbol (``P``, ``B``, ``n``) is bound by the first array that uses it, and every
other array must agree. ``"steps+1"`` adds to a symbol; a plain integer is a
fixed length.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpviz.engine import private

DTYPES = ("float32", "float64", "int64", "bool", "str", "bytes")  # "str": numpy unicode; "bytes": numpy S
MAX_HEADER_BYTES = 16 << 20   # a record's .json is metadata: kilobytes; refuse anything near this
MAX_ARRAY_BYTES = 2 << 30     # what a load may decompress, from the shapes the .npz declares, before it reads a byte
HELD_BYTES = 1 << 20          # a loaded array larger than this is read from its file at each use instead of kept in memory


@dataclass(frozen=True)
class Array:
    """One array of a record kind."""

    name: str
    shape: tuple  # symbols, e.g. ("steps", "k", "P"); () for a scalar
    dtype: str  # one of DTYPES
    meaning: str
    optional: str = ""  # when the array may be absent, in words ("only the line model"); "" means always present
    nonfinite: str = ""  # when NaN or inf may appear, in words ("NaN: no bucket"); "" means every value is finite

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype of array {self.name!r} must be one of {', '.join(DTYPES)}; got {self.dtype!r}.")

    def shape_words(self) -> str:
        return "(" + ", ".join(map(str, self.shape)) + ("," if len(self.shape) == 1 else "") + ")"


@dataclass(frozen=True)
class Meta:
    """One metadata field of a record kind (a JSON value)."""

    name: str
    type: str  # a word for readers: "int", "float", "str", "bool", "list", "dict", "int or null"
    meaning: str


# Where and how a run ran: the same fields in most kinds' metadata, declared once here.
RAN_ON = {m.name: m for m in (
    Meta("backend", "str", "the torch.distributed backend"),
    Meta("device", "str", "cpu, or the GPU's name"),
    Meta("threads_per_rank", "int", "intra-op threads each rank ran with"),
    Meta("torch_version", "str", "torch.__version__ of the ranks"),
    Meta("host", "str", "the machine's host name"),
    Meta("platform", "str", "the operating system"),
    Meta("cores", "int", "cores the launching process could use"),
    Meta("date", "str", "when it was recorded (ISO 8601)"),
)}


def ran_on(*names: str) -> tuple:
    """The standard metadata rows saying where a record was made, in the order given: ``*ran_on("host", "date")``."""
    return tuple(RAN_ON[name] for name in names)


@dataclass(frozen=True)
class Kind:
    """A record kind: its name, schema version, arrays and metadata fields."""

    name: str
    version: int
    arrays: tuple  # of Array
    meta: tuple  # of Meta
    doc: str = ""  # one sentence: what a record of this kind holds

    def array(self, name: str) -> Array:
        for a in self.arrays:
            if a.name == name:
                return a
        raise KeyError(name)

    def validate(self, meta: dict, arrays: dict, where: str) -> None:
        """Raise ``ValueError`` with one sentence naming ``where`` and the first thing that does not fit the table."""
        declared = {a.name for a in self.arrays}
        for a in self.arrays:
            if a.name not in arrays and not a.optional:
                raise ValueError(f"{where} lacks the array {a.name!r} that a {self.name!r} record must hold ({a.meaning}).")
        extra = sorted(set(arrays) - declared)
        if extra:
            raise ValueError(f"{where} holds the array {extra[0]!r}, which a {self.name!r} record of schema_version {self.version} does not declare.")
        fields = {m.name for m in self.meta}
        missing = [m.name for m in self.meta if m.name not in meta]
        if missing:
            raise ValueError(f"{where} lacks the metadata field {missing[0]!r} that a {self.name!r} record must hold.")
        unknown = sorted(set(meta) - fields)
        if unknown:
            raise ValueError(f"{where} holds the metadata field {unknown[0]!r}, which a {self.name!r} record does not declare.")
        sizes = {m.name: meta[m.name] for m in self.meta if isinstance(meta.get(m.name), int) and not isinstance(meta.get(m.name), bool)}
        for a in self.arrays:
            if a.name not in arrays:
                continue
            value = np.asarray(arrays[a.name])
            if not _dtype_ok(value.dtype, a.dtype):
                raise ValueError(f"{where}: array {a.name!r} has dtype {value.dtype}; a {self.name!r} record declares {a.dtype}.")
            expected = _bind(a, value.shape, sizes)
            if expected is not None:
                raise ValueError(
                    f"{where}: array {a.name!r} has shape {value.shape}; a {self.name!r} record declares {a.shape_words()}, "
                    f"which here means {expected}."
                )
            if value.dtype.kind == "f" and not a.nonfinite:
                bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
                if bad:
                    raise ValueError(f"{where}: array {a.name!r} holds NaN or inf in {bad} place{'s' if bad > 1 else ''}; "
                                     f"in a {self.name!r} record every value of it is finite ({a.meaning}).")

    def markdown(self) -> str:
        """The kind's tables for the record reference (docs/records.md): arrays, then metadata fields."""
        lines = [f"### `{self.name}` records (schema version {self.version})", "", self.doc, "",
                 "| array | shape | dtype | meaning |", "| --- | --- | --- | --- |"]
        for a in self.arrays:
            note = (f" (present {a.optional})" if a.optional else "") + (f" (NaN or inf {a.nonfinite})" if a.nonfinite else "")
            lines.append(f"| `{a.name}` | {a.shape_words()} | {a.dtype} | {a.meaning}{note} |")
        lines += ["", "| metadata | type | meaning |", "| --- | --- | --- |"]
        lines += [f"| `{m.name}` | {m.type} | {m.meaning} |" for m in self.meta]
        return "\n".join(lines) + "\n"


def _dtype_ok(actual: np.dtype, declared: str) -> bool:
    if declared == "str":
        return actual.kind == "U"
    if declared == "bytes":
        return actual.kind == "S"
    return actual == np.dtype(declared)


_TERM = re.compile(r"^([A-Za-z_]\w*)(?:([+-])(\d+))?$")


def _bind(array: Array, shape: tuple, sizes: dict):
    """Check ``shape`` against the array's symbols, binding new symbols in ``sizes``; the expected shape if it fails."""
    if len(shape) != len(array.shape):
        return array.shape_words()
    wanted = []
    for symbol, n in zip(array.shape, shape):
        if isinstance(symbol, int):
            wanted.append(symbol)
            continue
        name, sign, offset = _TERM.match(symbol).groups()
        delta = (int(offset) if sign == "+" else -int(offset)) if sign else 0
        if name not in sizes:
            sizes[name] = n - delta
        wanted.append(sizes[name] + delta)
    if tuple(wanted) != tuple(shape):
        return tuple(wanted)
    return None


_CASTS = {"int": int, "float": float, "str": str, "bool": bool, "list": list}  # Meta.type -> the Python value


def _typed(value, cast):
    return value if cast is None or value is None else cast(value)


class Record:
    """A record of one kind: ``meta`` (how it was made) and ``arrays`` (what happened).

    Each subclass sets ``KIND``. Every declared array is then an attribute of the
    same name (``run.local_grad``), and an optional array that is absent reads as
    None. Every declared metadata field is an attribute too (``run.k``, ``run.cores``),
    typed as declared, unless an array or the class itself already uses the name.
    """

    KIND: Kind

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if getattr(cls, "KIND", None) is None:
            return  # an abstract base such as RankRecord: its subclasses declare the kind
        for a in cls.KIND.arrays:
            if not hasattr(cls, a.name):
                setattr(cls, a.name, property(lambda self, n=a.name: self.arrays.get(n), doc=f"{a.shape_words()} {a.meaning}"))
        for m in cls.KIND.meta:
            if not hasattr(cls, m.name):
                setattr(cls, m.name, property(lambda self, n=m.name, cast=_CASTS.get(m.type): _typed(self.meta[n], cast),
                                              doc=f"({m.type}) {m.meaning}"))

    def __init__(self, meta: dict, arrays: dict):
        self.meta = dict(meta)
        self.arrays = {name: np.asarray(value) for name, value in arrays.items()}
        self.KIND.validate(self.meta, self.arrays, f"a {self.KIND.name} record")

    def describe(self) -> str:
        """One line naming the record: what a figure made from it should say."""
        m = self.meta
        return f"{self.KIND.name} record, {m.get('backend', '?')}, {m.get('host', '?')}, {m.get('cores', '?')} cores, {str(m.get('date', ''))[:10]}"

    def __repr__(self):
        return f"{type(self).__name__}({self.describe()})"

    def save(self, path) -> Path:
        """Write ``<stem>.npz`` and ``<stem>.json``; returns the stem.

        Both files are written under temporary names in the same folder and renamed into place only when
        both are complete, so an interrupted or failed save leaves the older record at ``path`` as it was.
        The header keeps a digest of the ``.npz``, so a ``.json`` never passes for another run's arrays.
        A name keeps every dot it has: ``runs/lr0.1`` writes ``runs/lr0.1.npz`` and ``runs/lr0.1.json``.
        """
        self.KIND.validate(self.meta, self.arrays, f"the {self.KIND.name} record to be saved at {str(path)!r}")
        base = stem(path)
        base.parent.mkdir(parents=True, exist_ok=True)
        npz_path, json_path = files(base)
        temporary = []
        try:
            npz_tmp = _temporary(base, ".npz", temporary)
            with open(npz_tmp, "wb") as f:
                write_npz(f, self.arrays)
                f.flush()
                os.fsync(f.fileno())
            header = {"kind": self.KIND.name, "schema_version": self.KIND.version, "arrays": sorted(self.arrays),
                      "npz_sha256": _digest(npz_tmp), "meta": self.meta}
            json_tmp = _temporary(base, ".json", temporary)
            with open(json_tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(header, indent=1, sort_keys=True, default=_plain) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(npz_tmp, npz_path)
            os.replace(json_tmp, json_path)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                need = sum(np.asarray(a).nbytes for a in self.arrays.values())
                free = _free_bytes(base.parent)
                raise OSError(e.errno, f"no space left to save the record at {str(base)!r}: it needs up to "
                                       f"{_size(need)} and {_size(free)} are free; any older record there is untouched.") from None
            raise OSError(e.errno, f"cannot save the record at {str(base)!r}: {e.strerror or e}; any older record "
                                   "there is untouched.") from None
        finally:
            for name in temporary:  # renamed into place, or left over from a save that did not finish
                Path(name).unlink(missing_ok=True)
        return base

    @classmethod
    def load(cls, path):
        """Read a record of this kind; a missing, damaged, other-kind or other-schema file raises one sentence naming it."""
        record = load(path)
        if not isinstance(record, cls):
            raise ValueError(f"path {str(stem(path))!r} holds a {record.KIND.name!r} record, not a {cls.KIND.name!r} record.")
        return record


KINDS: dict[str, type] = {}  # kind name -> Record subclass; filled by register(), completed by kinds()


def kinds() -> dict:
    """Every record kind of the course, by name: each chapter's record modules are imported on the first call.

    The chapters are found through :mod:`dpviz.course`, which imports nothing itself, so the engine
    names no chapter.
    """
    from dpviz import course  # the course's order of chapters; importing it imports no chapter

    course.import_record_kinds()
    return KINDS


class RankRecord(Record):
    """A record of a run on k ranks, whose metadata declares ``k`` and ``cores``."""

    @property
    def processes(self) -> int:
        """How many processes the run had: its k ranks (a kind that had more, such as a server, says so)."""
        return int(self.meta["k"])

    @property
    def oversubscribed(self) -> bool:
        """More processes than cores: they took turns on the CPU, and the recorded times include that."""
        return self.processes > int(self.meta["cores"])


def register(cls):
    """Class decorator: make a record kind known to :func:`load`."""
    KINDS[cls.KIND.name] = cls
    return cls


def stem(path) -> Path:
    """The path without a ``.npz`` or ``.json`` suffix; any other dot is part of the name (``runs/lr0.1``)."""
    path = Path(path)
    return path.with_suffix("") if path.suffix in (".npz", ".json") else path


def files(base) -> tuple[Path, Path]:
    """The two files of the record named ``base``: the name with ``.npz`` and ``.json`` appended, dots and all."""
    base = stem(base)
    return base.with_name(base.name + ".npz"), base.with_name(base.name + ".json")


def _temporary(base: Path, suffix: str, made: list) -> str:
    fd, name = tempfile.mkstemp(prefix=f".{base.name}.", suffix=suffix + ".tmp", dir=base.parent)
    os.close(fd)
    made.append(name)
    return name


def _digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _free_bytes(folder: Path) -> int:
    try:
        return os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    except OSError:
        return 0


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


SAMPLE_BYTES = 1 << 16  # bytes of an array tried with deflate (from its start and its middle) to decide how to store it
DEFLATE_GAIN = 0.9  # an array is deflated only if the sample shrinks below this share of its size


def write_npz(f, arrays: dict) -> None:
    """Write ``arrays`` to the open binary file ``f`` as a ``.npz`` (a zip of ``.npy`` files, what ``np.load`` reads).

    Each array is deflated only if deflating pays: indices, counts, flags and repeated values shrink several times,
    while the float32 gradients and parameters a run records barely shrink (the MLP runs' 33 MB went to 30 MB) and
    cost seconds to deflate and again to inflate at every read. So a sample of each array's bytes is deflated
    first (fast, level 1), and the array is written deflated (zlib's default level) only if the sample shrank below
    :data:`DEFLATE_GAIN` of its size, else stored as it is. The members carry a fixed date, so the same arrays
    give the same bytes.
    """
    with zipfile.ZipFile(f, "w", allowZip64=True) as z:
        for name, value in arrays.items():
            array = np.asanyarray(value)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if _deflate_pays(array) else zipfile.ZIP_STORED
            with z.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _deflate_pays(array: np.ndarray) -> bool:
    data = np.ravel(array, order="A").view(np.uint8)  # its bytes as written, whatever its dtype; no copy if contiguous
    middle = len(data) // 2
    sample = data[:SAMPLE_BYTES].tobytes() + data[middle:middle + SAMPLE_BYTES].tobytes()
    return len(sample) < 256 or len(zlib.compress(sample, 1)) < DEFLATE_GAIN * len(sample)


def load(path) -> Record:
    """Read any record written by :meth:`Record.save`, as the class of its kind.

    Refuses, with one sentence naming the file and what is wrong: a missing file, a truncated or damaged
    one, a header that is not a record's (wrong types, too deep, too large), an unknown kind, another
    schema version, a ``.npz`` that is not the one its header was saved with, arrays whose declared shapes
    would decompress to more than :data:`MAX_ARRAY_BYTES` (checked before anything is decompressed), and a
    missing, extra, wrongly shaped or wrongly typed array.
    """
    base = stem(path)
    npz_path, json_path = files(base)
    for p in (json_path, npz_path):
        if not p.is_file():
            raise FileNotFoundError(f"path {str(p)!r} does not exist; a record needs both {base}.json and {base}.npz.")
    if json_path.stat().st_size > MAX_HEADER_BYTES:
        raise ValueError(f"path {str(json_path)!r} is {_size(json_path.stat().st_size)}, too large for a record header "
                         f"(at most {_size(MAX_HEADER_BYTES)}).")
    try:
        header = json.loads(json_path.read_text(encoding="utf-8"))
        kind, version, names, meta = header["kind"], header["schema_version"], header["arrays"], header["meta"]
    except RecursionError:
        raise ValueError(f"path {str(json_path)!r} is nested too deeply to be a record header.") from None
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"path {str(json_path)!r} is truncated or not a record header ({type(e).__name__}).") from None
    if not (isinstance(kind, str) and isinstance(version, int) and isinstance(meta, dict) and isinstance(names, list)
            and all(isinstance(n, str) for n in names)):
        raise ValueError(f"path {str(json_path)!r} is not a record header: kind must be a string, schema_version an "
                         "integer, arrays a list of names and meta an object.")
    if kind not in kinds():
        raise ValueError(f"path {str(json_path)!r} holds a record of kind {kind!r}; this dpviz reads {', '.join(map(repr, sorted(KINDS)))}.")
    cls = KINDS[kind]
    if version != cls.KIND.version:
        raise ValueError(
            f"path {str(json_path)!r} holds a {kind!r} record of schema_version {version!r}; this dpviz reads "
            f"schema_version {cls.KIND.version} (record it again with this dpviz)."
        )
    z = None
    try:
        z = np.load(npz_path, allow_pickle=False)
        _check_sizes(z, npz_path)
        arrays = {name: z[name] for name in z.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as e:
        if z is not None:
            z.close()
        if isinstance(e, ValueError) and str(e).startswith("path "):
            raise
        raise ValueError(f"path {str(npz_path)!r} is truncated or damaged and cannot be read ({type(e).__name__}).") from None
    digest = header.get("npz_sha256")
    if digest is not None and digest != _digest(npz_path):
        raise ValueError(f"path {str(npz_path)!r} is not the file its header {str(json_path)!r} was saved with (their "
                         "digests differ): the two belong to different saves; record the run again.")
    if sorted(arrays) != sorted(names):
        odd = sorted(set(arrays) ^ set(names))[0]
        raise ValueError(f"path {str(npz_path)!r} and its header disagree about the array {odd!r}.")
    try:
        cls.KIND.validate(meta, arrays, f"path {str(npz_path)!r}")
    except ValueError:
        z.close()
        raise
    record = cls.__new__(cls)
    record.meta, record.arrays = meta, StoredArrays(arrays, z)
    dropped = bool(record.arrays._stored)
    del arrays
    if dropped:  # the large arrays just read and let go: their pages go back to the system
        release_freed_memory()
    return record


def release_freed_memory() -> None:
    """Hand the memory of arrays already let go back to the operating system, where the C library allows (glibc).

    glibc may keep a freed block of a few MB for the process to reuse rather than return it: loading the figure
    records (``load_inputs()``) left a plain interpreter 16 MB larger than this call does, an idle chapter's kernel
    3 MB (benchmarks/bench_memory.py). The call takes about 2 ms. Elsewhere it does nothing. It is glibc's
    ``malloc_trim``, which Python has no public call for: :func:`dpviz.engine.private.release_freed_memory`.
    """
    private.release_freed_memory()


class StoredArrays(MutableMapping):
    """A loaded record's arrays, by name: each one over :data:`HELD_BYTES` is read again from its file at each use.

    A chapter's set-up loads every record its figures need, and a few of them (the MLP runs' gradients, every
    rank at every step) are tens of MB that a check reads once; holding them would double what an idle kernel
    costs. Each large array was read and validated by :func:`load` like the others; it is then dropped, and the
    ``.npz`` stays open, so a later read comes from the same file even if the path now names a newer record.
    A large array comes back read-only (a change to it would be lost at the next read); assigning a new array
    to a name keeps that one in memory. A pickled or copied record carries plain arrays.
    """

    def __init__(self, arrays: dict, npz):
        self._held = {name: a for name, a in arrays.items() if a.nbytes <= HELD_BYTES}
        self._stored = [name for name in arrays if name not in self._held]
        self._npz = npz if self._stored else None
        self._order = list(arrays)
        if self._npz is None:
            npz.close()

    def __getitem__(self, name):
        if name in self._held:
            return self._held[name]
        if name not in self._stored:
            raise KeyError(name)
        array = self._npz[name]
        array.setflags(write=False)
        return array

    def __setitem__(self, name, value):
        self._held[name] = value
        if name in self._stored:
            self._stored.remove(name)
        elif name not in self._order:
            self._order.append(name)

    def __delitem__(self, name):
        if name not in self._order:
            raise KeyError(name)
        self._held.pop(name, None)
        if name in self._stored:
            self._stored.remove(name)
        self._order.remove(name)

    def __iter__(self):
        return iter(list(self._order))

    def __len__(self):
        return len(self._order)

    def __contains__(self, name):  # by name: Mapping's own would read a large array to answer
        return name in self._order

    def __reduce__(self):
        return dict, (dict(self.items()),)

    def __repr__(self):
        return f"StoredArrays({', '.join(self._order)}; read at each use: {', '.join(self._stored) or 'none'})"


def _check_sizes(z, npz_path) -> None:
    """Refuse, before decompressing anything, a .npz whose arrays declare more than MAX_ARRAY_BYTES in all."""
    total = 0
    for info in z.zip.infolist():
        with z.zip.open(info) as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
        if dtype.hasobject:
            raise ValueError(f"path {str(npz_path)!r}: array {info.filename!r} holds Python objects, which a record never does.")
        total += int(np.prod(shape, dtype=object)) * dtype.itemsize
        if total > MAX_ARRAY_BYTES:
            raise ValueError(f"path {str(npz_path)!r} declares arrays of more than {_size(MAX_ARRAY_BYTES)} in all "
                             f"({info.filename!r} has shape {shape}), more than any record holds; it was not read.")


def provenance(record) -> dict:
    """What made a figure, for a manifest: the record's kind, its one-line description and where it ran.

    Works for every kind; a plain string (a computation in one process, say) is kept as the source.
    """
    if isinstance(record, str):
        return {"source": record}
    if not isinstance(record, Record):
        raise TypeError(f"record must be a dpviz record or a string; got {type(record).__name__}.")
    keys = ("k", "ks", "b", "model", "optimizer", "all_reduce", "sampling", "impl", "threads_per_rank", "backend",
            "device", "host", "cores", "torch_version", "date")
    entry = {"kind": record.KIND.name, "schema_version": record.KIND.version}
    entry.update({key: record.meta[key] for key in keys if key in record.meta})
    entry["describe"] = record.describe()
    return entry


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} into a record's metadata")
