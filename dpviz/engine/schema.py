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

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import socket
import time
import zipfile
import zlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpviz.engine import private

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; a save's renames are then not fenced from readers
    fcntl = None

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
    """One metadata field of a record kind (a JSON value), whose type :meth:`Kind.validate` checks."""

    name: str
    type: str  # one of META_TYPES, or one of them followed by " or null": "int", "float", "list or null"
    meaning: str
    nonfinite: str = ""  # a float's: when it may be NaN or inf, in words ("NaN: no save"); "" means always finite

    def __post_init__(self):
        if self.type.removesuffix(" or null") not in META_TYPES:
            raise ValueError(f"type of metadata field {self.name!r} must be one of {', '.join(META_TYPES)} (or one of "
                             f"them followed by ' or null'); got {self.type!r}.")

    def accepts(self, value) -> bool:
        """Whether ``value`` is of the declared type: a JSON value, or in a record being made the numpy scalar
        or tuple that saving writes as one."""
        if value is None:
            return self.type.endswith(" or null")
        return isinstance(value, META_TYPES[self.type.removesuffix(" or null")]) and (
            self.type.startswith("bool") or not isinstance(value, (bool, np.bool_)))


META_TYPES = {  # Meta.type -> what a value of it may be (a bool is never an int or a float here)
    "int": (int, np.integer),
    "float": (int, float, np.integer, np.floating),
    "str": (str,),
    "bool": (bool, np.bool_),
    "list": (list, tuple),
    "dict": (dict,),
}


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
        values = {name: np.asarray(value) for name, value in arrays.items()}
        self.check_layout(meta, {name: (v.shape, v.dtype) for name, v in values.items()}, where)
        for a in self.arrays:
            value = values.get(a.name)
            if value is not None and value.dtype.kind == "f" and not a.nonfinite:
                bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
                if bad:
                    raise ValueError(f"{where}: array {a.name!r} holds NaN or inf in {bad} place{'s' if bad > 1 else ''}; "
                                     f"in a {self.name!r} record every value of it is finite ({a.meaning}).")

    def check_layout(self, meta: dict, layouts: dict, where: str) -> None:
        """Check the metadata and each array's ``(shape, dtype)`` against the table, without any array's values.

        :func:`load` calls it with the shapes and dtypes the ``.npy`` headers declare, before it decompresses
        a byte of them; :meth:`validate` with the arrays themselves.
        """
        declared = {a.name for a in self.arrays}
        for a in self.arrays:
            if a.name not in layouts and not a.optional:
                raise ValueError(f"{where} lacks the array {a.name!r} that a {self.name!r} record must hold ({a.meaning}).")
        extra = sorted(set(layouts) - declared)
        if extra:
            raise ValueError(f"{where} holds the array {extra[0]!r}, which a {self.name!r} record of schema_version {self.version} does not declare.")
        fields = {m.name for m in self.meta}
        missing = [m.name for m in self.meta if m.name not in meta]
        if missing:
            raise ValueError(f"{where} lacks the metadata field {missing[0]!r} that a {self.name!r} record must hold.")
        unknown = sorted(set(meta) - fields)
        if unknown:
            raise ValueError(f"{where} holds the metadata field {unknown[0]!r}, which a {self.name!r} record does not declare.")
        for m in self.meta:
            value = meta[m.name]
            if not m.accepts(value):
                raise ValueError(f"{where}: metadata field {m.name!r} is {_short(value)}, of type "
                                 f"{type(value).__name__}; a {self.name!r} record declares it {m.type}.")
            # JSON's NaN and Infinity parse as floats; an int, however large, is finite
            if isinstance(value, (float, np.floating)) and not m.nonfinite and not np.isfinite(value):
                raise ValueError(f"{where}: metadata field {m.name!r} is {_short(value)}; in a {self.name!r} record "
                                 f"it must be a finite number ({m.meaning}).")
        sizes = {m.name: int(meta[m.name]) for m in self.meta
                 if isinstance(meta[m.name], (int, np.integer)) and not isinstance(meta[m.name], (bool, np.bool_))}
        for a in self.arrays:
            if a.name not in layouts:
                continue
            shape, dtype = layouts[a.name]
            if not _dtype_ok(np.dtype(dtype), a.dtype):
                raise ValueError(f"{where}: array {a.name!r} has dtype {dtype}; a {self.name!r} record declares {a.dtype}.")
            expected = _bind(a, tuple(shape), sizes)
            if expected is not None:
                raise ValueError(
                    f"{where}: array {a.name!r} has shape {tuple(shape)}; a {self.name!r} record declares {a.shape_words()}, "
                    f"which here means {expected}."
                )

    def markdown(self) -> str:
        """The kind's tables for the record reference (docs/records.md): arrays, then metadata fields."""
        lines = [f"### `{self.name}` records (schema version {self.version})", "", self.doc, "",
                 "| array | shape | dtype | meaning |", "| --- | --- | --- | --- |"]
        for a in self.arrays:
            note = (f" (present {a.optional})" if a.optional else "") + (f" (NaN or inf {a.nonfinite})" if a.nonfinite else "")
            lines.append(f"| `{a.name}` | {a.shape_words()} | {a.dtype} | {a.meaning}{note} |")
        lines += ["", "| metadata | type | meaning |", "| --- | --- | --- |"]
        lines += [f"| `{m.name}` | {m.type} | {m.meaning}{f' (NaN or inf {m.nonfinite})' if m.nonfinite else ''} |"
                  for m in self.meta]
        return "\n".join(lines) + "\n"


def _short(value) -> str:
    text = json.dumps(value, default=_plain) if not isinstance(value, np.generic) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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

        Both files are written whole under temporary names in the same folder, the ``.json`` holding the digest
        of the ``.npz``, then renamed into place, the ``.npz`` first, while other savers and readers in the folder
        wait (:func:`folder_lock`). A save that fails or is interrupted before the first rename leaves the older
        record as it was; one killed between the two renames leaves the new ``.npz`` beside its complete header,
        and :func:`load` reads that pair, the new record, whole (and puts the header in place). Temporary files
        that a killed save left are removed by the next save or load in the folder (:func:`remove_stale`).
        The files take the process's umask, as a plain ``open`` would. A name keeps every dot it has:
        ``runs/lr0.1`` writes ``runs/lr0.1.npz`` and ``runs/lr0.1.json``. A save that cannot be written raises
        :class:`RecordSaveError`; one whose folder another process keeps locked past :data:`LOCK_WAIT`,
        :class:`FolderLockTimeout`, its temporary files removed and any older record untouched.
        """
        base = stem(path)
        self.KIND.validate(self.meta, self.arrays, f"the {self.KIND.name} record to be saved at {str(path)!r}")
        npz_path, json_path = files(base)
        npz_tmp = json_tmp = None
        renamed = 0
        try:
            base.parent.mkdir(parents=True, exist_ok=True)
            remove_stale(base.parent)
            npz_tmp, json_tmp = _temporary_names(base)
            with _create(npz_tmp, "wb") as f:
                write_npz(f, self.arrays)
                f.flush()
                os.fsync(f.fileno())
            header = {"kind": self.KIND.name, "schema_version": self.KIND.version, "arrays": sorted(self.arrays),
                      "npz_sha256": _digest(npz_tmp), "meta": self.meta}
            with _create(json_tmp, "w", encoding="utf-8") as f:
                f.write(json.dumps(header, indent=1, sort_keys=True, default=_plain) + "\n")
                f.flush()
                os.fsync(f.fileno())
            with folder_lock(base.parent, exclusive=True):
                os.replace(npz_tmp, npz_path)
                renamed = 1
                try:
                    os.replace(json_tmp, json_path)
                except BaseException:  # interrupted between the renames: finish the pair if the rename can be made
                    with contextlib.suppress(OSError):
                        os.replace(json_tmp, json_path)
                    raise
                renamed = 2
            _sync_folder(base.parent)
        except FolderLockTimeout:
            raise  # its own sentence; the temporary files go below and the older record stays as it was
        except OSError as e:
            _discard(npz_tmp, json_tmp, renamed)  # first, so that the space they held counts as free below
            npz_tmp = json_tmp = None
            if renamed:
                raise RecordSaveError(e.errno, f"cannot finish saving the record at {str(base)!r}: {e.strerror or e}; "
                                      "its arrays are in place and the next load reads them with their header.",
                                      str(base)) from None
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                need = sum(np.asarray(a).nbytes + 4096 for a in self.arrays.values())
                raise RecordSaveError(e.errno, f"no space left to save the record at {str(base)!r}: it needs up to "
                                      f"{_size(need)} and {_size(_free_bytes(base.parent))} are free; any older record "
                                      "there is untouched.", str(base)) from None
            raise RecordSaveError(e.errno, f"cannot save the record at {str(base)!r}: {e.strerror or e}; any older "
                                  "record there is untouched.", str(base)) from None
        finally:
            _discard(npz_tmp, json_tmp, renamed)
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
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path naming a record, such as 'runs/k4'; got {type(path).__name__}.")
    path = Path(path)
    if path.name in ("", ".", "..") or path.name in (".npz", ".json"):
        raise ValueError(f"path {str(path) if str(path) != '.' else ''!r} names no record: give a record's name, such "
                         "as 'runs/k4' for runs/k4.npz and runs/k4.json.")
    return path.with_suffix("") if path.suffix in (".npz", ".json") else path


def files(base) -> tuple[Path, Path]:
    """The two files of the record named ``base``: the name with ``.npz`` and ``.json`` appended, dots and all."""
    base = stem(base)
    return base.with_name(base.name + ".npz"), base.with_name(base.name + ".json")


class RecordSaveError(OSError):
    """A record could not be saved (a full disk, a folder that cannot be written); its text is one sentence with
    the path, and for a full disk the space needed. Any older record at the path is untouched."""

    def __str__(self):
        return str(self.strerror)


# --- temporary files: whose they are, and when they are stale ---

# A save writes ".NAME.<host>-<pid>-<random>.npz.tmp" and ".NAME.<host>-<pid>-<random>.json.tmp", host being
# the first 8 hex digits of a hash of the host name, so that a later save or load can tell whether the writer
# still runs. Saves of earlier versions wrote ".NAME.<8 random characters>.npz.tmp" (tempfile.mkstemp).
TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[0-9a-z]{8}\.(?P<ext>npz|json)\.tmp$")
OLDER_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.[0-9a-z_]{8}\.(?P<ext>npz|json)\.tmp$")
STALE_SECONDS = 3600  # a temporary file no live writer on this host owns, or left unchanged this long, is stale


def _host() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _temporary_names(base: Path) -> tuple[Path, Path]:
    tag = f"{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    return (base.with_name(f".{base.name}.{tag}.npz.tmp"), base.with_name(f".{base.name}.{tag}.json.tmp"))


def _create(path: Path, mode: str, **kwargs):
    """Open a new file for writing (never an existing one), with the permissions the umask allows, as ``open`` gives."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), mode, **kwargs)


def _discard(npz_tmp, json_tmp, renamed: int) -> None:
    """After a save that did not finish, remove its temporary files: the header first, so that a header left
    without its ``.npz`` temporary always means that ``.npz`` was renamed into place (what :func:`remove_stale`
    relies on). A save stopped between its renames keeps its header for :func:`load` to read and put in place."""
    if renamed == 1:
        return
    for name in (json_tmp, npz_tmp):
        if name is not None:
            Path(name).unlink(missing_ok=True)


def _owner(temporary: Path) -> Path:
    """The record a temporary file of a save (of this dpviz or an earlier one) belongs to."""
    name = Path(temporary).name
    return Path(temporary).with_name((TEMPORARY.match(name) or OLDER_TEMPORARY.match(name))["name"])


def _stale(entry, match, now: float) -> bool:
    try:
        age = now - entry.stat().st_mtime
    except OSError:
        return False
    if age > STALE_SECONDS:
        return True
    if match.re is not TEMPORARY or match["host"] != _host():
        return False
    pid = int(match["pid"])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it runs, as another user
    return False


def remove_stale(folder) -> None:
    """Remove the temporary files that saves no longer running left in ``folder``; what cannot be removed stays.

    A save still running (its process is alive on this host) keeps its files; so does one from another host
    unless its file has not changed for :data:`STALE_SECONDS`. A header whose save was killed after its ``.npz``
    was renamed into place is put in place itself, if it is that ``.npz``'s header.
    """
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(".") and e.name.endswith(".tmp")]
    except OSError:
        return
    now = time.time()
    present = {e.name for e in entries}
    for entry in entries:
        match = TEMPORARY.match(entry.name) or OLDER_TEMPORARY.match(entry.name)
        if match is None or not _stale(entry, match, now):
            continue
        path = Path(folder) / entry.name
        try:
            alone = match.re is OLDER_TEMPORARY or entry.name[:-len("json.tmp")] + "npz.tmp" not in present
            if match["ext"] == "json" and alone:
                _finish(path)  # perhaps a save killed between its renames: the header goes in place if it fits
            else:
                path.unlink(missing_ok=True)
        except OSError:
            continue  # a folder this user may not write, or another process that removed it first


def _finish(json_tmp: Path) -> None:
    """Put in place the header of a save killed between its renames, if its ``.npz`` is the one in place; else drop it."""
    npz_path, json_path = files(_owner(json_tmp))
    # without waiting: a lock held now leaves the header to a later save or load (a load reads it in place anyway)
    with folder_lock(json_tmp.parent, exclusive=True, wait=0):
        wanted = _header_digest(json_tmp)
        fits = wanted is not None and wanted != _header_digest(json_path) and npz_path.is_file()
        if fits and _digest(npz_path) == wanted:
            os.replace(json_tmp, json_path)
        else:
            json_tmp.unlink(missing_ok=True)


def _header_digest(path: Path):
    """The ``npz_sha256`` a header file names, or None if it is missing, too large or not a record header."""
    try:
        if path.stat().st_size > MAX_HEADER_BYTES:
            return None
        digest = json.loads(path.read_text(encoding="utf-8")).get("npz_sha256")
        return digest if isinstance(digest, str) else None
    except (OSError, ValueError, AttributeError, RecursionError):
        return None


def _interrupted_header(base: Path, digest: str):
    """The text of a whole header that a save killed between its renames left for the ``.npz`` whose digest is
    ``digest``, or None."""
    try:
        names = [e.name for e in os.scandir(base.parent)
                 if e.name.startswith(f".{base.name}.") and e.name.endswith(".json.tmp")]
    except OSError:
        return None
    for name in names:
        match = TEMPORARY.match(name) or OLDER_TEMPORARY.match(name)
        if match is None or match["name"] != base.name:
            continue
        candidate = base.parent / name
        if _header_digest(candidate) == digest:
            try:
                return candidate.read_text(encoding="utf-8")
            except OSError:
                continue
    return None


LOCK_WAIT = 30.0   # seconds a save or load waits for another process to let go of a records folder's lock
LOCK_POLL = 0.05   # seconds between two tries of the lock while it waits


class FolderLockTimeout(TimeoutError):
    """Another process held a records folder's lock longer than :func:`folder_lock` waits; ``folder`` is the
    folder and ``pid`` the holder's process id, or None where it could not be found."""

    def __init__(self, message: str, folder=None, pid=None):
        super().__init__(message)
        self.folder, self.pid = folder, pid


@contextlib.contextmanager
def folder_lock(folder, *, exclusive: bool, wait: float | None = None):
    """Hold an advisory lock on ``folder`` (``flock``): a save's two renames take it exclusively, a load's reading
    of the pair shared, so a reader never opens one save's ``.json`` with another's ``.npz``. Where the platform or
    the file system offers no lock, nothing is held.

    Anyone who can read the folder can take its lock and keep it, so the lock is awaited at most ``wait`` seconds
    (:data:`LOCK_WAIT` by default); then :class:`FolderLockTimeout` names the holder, rather than a finished
    training hanging in its save with no word.
    """
    wait = LOCK_WAIT if wait is None else wait  # read at each call, so that a test may shorten it
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(folder, os.O_RDONLY)
            taken = _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, wait)
        except OSError:
            if fd is not None:
                os.close(fd)
            fd = None
        else:
            if not taken:
                os.close(fd)
                pid = lock_holder(folder)
                holder = f"process {pid}" if pid is not None else "another process (its id could not be found)"
                raise FolderLockTimeout(f"records folder {str(folder)!r} stayed locked by {holder} for the {wait:g} s "
                                        "this process waits, so nothing in it was read or changed.", str(folder), pid)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the lock


def _flock(fd: int, operation: int, wait: float) -> bool:
    """Take the lock within ``wait`` seconds, trying every :data:`LOCK_POLL` s; whether it was taken."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:  # held by another open file
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(LOCK_POLL, left))


def lock_holder(path):
    """The id of a process holding a ``flock`` on ``path``, from Linux's /proc/locks; None where it cannot be told
    (another system, a holder in another PID namespace, a file system whose device numbers stat reports otherwise).
    """
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        # "3: FLOCK  ADVISORY  WRITE 4242 fe:00:2146624 0 EOF"; a process still waiting has "->" after the number
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            same = (int(major, 16), int(minor, 16), int(inode)) == (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
            pid = int(fields[4])
        except ValueError:
            continue
        if same and pid > 0:  # 0 or -1: a holder this process's PID namespace cannot see
            return pid
    return None


def _sync_folder(folder: Path) -> None:
    """Make the renames durable (the folder's entries to disk) where the platform allows."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
    schema version, metadata missing, undeclared or not of its declared type, a ``.npz`` that is not the one
    its header was saved with, and a missing, extra, wrongly shaped or wrongly typed array. The ``.npz``'s
    member list and each member's ``.npy`` header (shape, dtype, size) are checked before anything is
    decompressed: arrays the header does not name, shapes the kind does not allow, sizes that disagree with
    the shapes, or more than :data:`MAX_ARRAY_BYTES` in all are refused without decompressing them. A pair
    that a save killed between its renames left is read as the new record (its header is found beside it).
    Stale temporary files of killed saves in the folder are removed first (:func:`remove_stale`).
    """
    base = stem(path)
    npz_path, json_path = files(base)
    remove_stale(base.parent)
    for p in (json_path, npz_path):
        if not p.is_file():
            raise FileNotFoundError(f"path {str(p)!r} does not exist; a record needs both {base}.json and {base}.npz.")
    if json_path.stat().st_size > MAX_HEADER_BYTES:
        raise ValueError(f"path {str(json_path)!r} is {_size(json_path.stat().st_size)}, too large for a record header "
                         f"(at most {_size(MAX_HEADER_BYTES)}).")
    # No save's renames between reading the header and opening the arrays:
    with folder_lock(base.parent, exclusive=False):
        try:
            text = json_path.read_bytes()[:MAX_HEADER_BYTES + 1]
            fid = open(npz_path, "rb")
        except OSError as e:
            raise ValueError(f"path {str(base)!r} cannot be read: {e.strerror or e}.") from None
    try:
        digest = hashlib.sha256()
        for block in iter(lambda: fid.read(1 << 20), b""):
            digest.update(block)
        fid.seek(0)
        digest = digest.hexdigest()
        header = _parse_header(text, json_path)
        try:
            z = np.lib.npyio.NpzFile(fid, own_fid=True, allow_pickle=False)  # reads the zip's directory only
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
            raise ValueError(f"path {str(npz_path)!r} is truncated or damaged and cannot be read ({type(e).__name__}).") from None
        if header.get("npz_sha256") is not None and header["npz_sha256"] != digest:
            newer = _interrupted_header(base, digest)
            if newer is None:
                raise ValueError(f"path {str(npz_path)!r} is not the file its header {str(json_path)!r} was saved with "
                                 "(their digests differ): the two belong to different saves; record the run again.")
            header = _parse_header(newer.encode("utf-8"), json_path)
        return _read(header, z, npz_path, json_path)
    except BaseException:
        fid.close()  # what _read does not keep open
        raise


def _parse_header(text: bytes, json_path: Path) -> dict:
    try:
        header = json.loads(text.decode("utf-8"))
        kind, version, names, meta = header["kind"], header["schema_version"], header["arrays"], header["meta"]
    except RecursionError:
        raise ValueError(f"path {str(json_path)!r} is nested too deeply to be a record header.") from None
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"path {str(json_path)!r} is truncated or not a record header ({type(e).__name__}).") from None
    if not (isinstance(kind, str) and isinstance(version, int) and isinstance(meta, dict) and isinstance(names, list)
            and all(isinstance(n, str) for n in names) and isinstance(header.get("npz_sha256", ""), str)):
        raise ValueError(f"path {str(json_path)!r} is not a record header: kind must be a string, schema_version an "
                         "integer, arrays a list of names, npz_sha256 a string and meta an object.")
    return header


def _read(header: dict, z, npz_path: Path, json_path: Path) -> Record:
    """The record whose checked header is ``header`` and whose ``.npz`` is the open ``NpzFile`` ``z``."""
    kind, version, names, meta = header["kind"], header["schema_version"], header["arrays"], header["meta"]
    if kind not in kinds():
        raise ValueError(f"path {str(json_path)!r} holds a record of kind {kind!r}; this dpviz reads {', '.join(map(repr, sorted(KINDS)))}.")
    cls = KINDS[kind]
    if version != cls.KIND.version:
        raise ValueError(
            f"path {str(json_path)!r} holds a {kind!r} record of schema_version {version!r}; this dpviz reads "
            f"schema_version {cls.KIND.version} (record it again with this dpviz)."
        )
    layouts = {}
    try:
        layouts = _check_members(z, names, npz_path)
        cls.KIND.check_layout(meta, layouts, f"path {str(npz_path)!r}")
        arrays = {name: z[name] for name in z.files}
        cls.KIND.validate(meta, arrays, f"path {str(npz_path)!r}")
    except MemoryError:
        z.close()
        arrays = None
        held = sum(int(np.prod(shape, dtype=object)) * dtype.itemsize for shape, dtype in layouts.values())
        raise MemoryError(f"path {str(npz_path)!r} holds {_size(held)} of arrays, more memory than this process could "
                          "get to read them.") from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as e:
        z.close()
        if isinstance(e, ValueError) and str(e).startswith("path "):
            raise
        raise ValueError(f"path {str(npz_path)!r} is truncated or damaged and cannot be read ({type(e).__name__}).") from None
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


def _check_members(z, names: list, npz_path) -> dict:
    """Each array's ``(shape, dtype)`` as its ``.npy`` header declares it, checked before anything is decompressed.

    The members must be exactly the header's arrays, each ``.npy`` member's size (zipfile's ``ZipInfo.file_size``)
    must be what its header's shape and dtype make, no array may hold Python objects, and all together may
    declare at most :data:`MAX_ARRAY_BYTES`. Only the start of each member (its ``.npy`` header) is read.
    """
    infos = z.zip.infolist()
    members = [info.filename for info in infos]
    wanted = [f"{name}.npy" for name in names]
    extra = [m for m in members if m not in wanted or members.count(m) > 1]
    if extra:
        raise ValueError(f"path {str(npz_path)!r} holds the member {extra[0]!r}{' twice' if extra[0] in wanted else ''}, "
                         "which its header does not list among its arrays; it was not read.")
    missing = [m for m in wanted if m not in members]
    if missing:
        raise ValueError(f"path {str(npz_path)!r} lacks the member {missing[0]!r} that its header lists; it was not "
                         "read.")
    total, layouts = 0, {}
    for info in infos:
        with z.zip.open(info) as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
            offset = f.tell()
        if dtype.hasobject:
            raise ValueError(f"path {str(npz_path)!r}: array {info.filename!r} holds Python objects, which a record never does.")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        total += nbytes
        if total > MAX_ARRAY_BYTES:
            raise ValueError(f"path {str(npz_path)!r} declares arrays of more than {_size(MAX_ARRAY_BYTES)} in all "
                             f"({info.filename!r} has shape {shape}), more than any record holds; it was not read.")
        if info.file_size != offset + nbytes:
            raise ValueError(f"path {str(npz_path)!r}: member {info.filename!r} is {info.file_size} bytes, but its header "
                             f"declares shape {shape} of {dtype}, {offset + nbytes} bytes; it was not read.")
        layouts[info.filename.removesuffix(".npy")] = (shape, dtype)
    return layouts


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
