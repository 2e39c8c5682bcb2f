"""A record is trusted no further than it was checked, and a save is all or nothing (issue 44, sections 2 and 3,
and section 5's ``load("")``).

Each test works on a real record: a run of 2 real ranks recorded here, or a shipped run, then tampered with,
saved, loaded and checked. The kills are real (SIGKILL of a child process, at a patched rename or write), the
full disk is a 1 MiB tmpfs, and the memory limit is RLIMIT_AS in a child process.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpviz.engine import schema
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.schema import RecordSaveError, load
from dpviz.topics.ground_floor.records import Run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run() -> Run:
    """A run of 2 real ranks (3 steps of the line model), recorded for these tests."""
    from dpviz.topics.ground_floor.run_training import record_run

    return record_run(k=2, b=4, steps=3)


def changed(run: Run, **arrays) -> Run:
    return Run(run.meta, {**run.arrays, **arrays})


def child(code: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python that has imported dpviz's records, from the repository root."""
    preamble = "import os, signal, sys, time\nfrom dpviz.engine import schema\nfrom dpviz.topics.ground_floor.records import Run\n"
    return subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(code), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, **kwargs)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- 2. what check() says follows from the arrays it read ---

def test_the_recorded_run_passes_its_check_and_a_saved_copy_too(run, tmp_path):
    words = run.check()
    assert "all 2 replicas held bit-identical parameters" in words
    assert load(run.save(tmp_path / "r")).check() == words


def test_parameters_that_no_longer_match_their_digests_fail_the_check(run, tmp_path):
    base = changed(run, params=np.full_like(run.params, np.inf)).save(tmp_path / "inf")  # identical across replicas
    with pytest.raises(AssertionError, match=r"stored parameter digests are not the digests of the stored parameters "
                                             r"at 8 \(state, rank\) pairs"):
        load(base).check()
    one_bit = run.params.copy()
    one_bit.view(np.uint32)[2, 1, 0] ^= 1  # the last bit of one parameter of one replica after step 2
    with pytest.raises(AssertionError, match=r"at 1 \(state, rank\) pair, the first \(2, 1\)"):
        load(changed(run, params=one_bit).save(tmp_path / "bit")).check()


def test_nan_losses_fail_the_check(run, tmp_path):
    loss = run.loss.copy()
    loss[1, 0] = np.nan
    base = changed(run, loss=loss).save(tmp_path / "nan")
    with pytest.raises(AssertionError, match=r"losses, averaged over their shards, differ from the big-batch loss by nan"):
        load(base).check()
    loss[1, 0] = run.loss[1, 0] * 1.01
    with pytest.raises(AssertionError, match="differ from the big-batch loss"):
        changed(run, loss=loss).check()


def test_a_shipped_run_with_older_digests_is_checked_against_its_parameters():
    shipped = Run.load(SHIPPED_DIR / "grid_k2_b4")
    assert len(shipped.param_digest[0, 0]) == 32  # BLAKE2b, from before the ranks used SHA-1
    assert "bit-identical parameters" in shipped.check()
    params = shipped.params.copy()
    params[-1, 0, 1] = np.nextafter(params[-1, 0, 1], np.inf)
    with pytest.raises(AssertionError, match=r"the first \(5, 0\)"):
        changed(shipped, params=params).check()


def test_a_bomb_whose_members_its_header_does_not_list_is_refused_before_it_is_inflated(run, tmp_path):
    base = run.save(tmp_path / "bomb")
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:  # 256 MB of zeros in 1 MB
        with z.open("junk.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (64 << 20,)})
            zeros = bytes(1 << 22)
            for _ in range(64):
                f.write(zeros)
    assert (tmp_path / "bomb.npz").stat().st_size < 2 << 20
    header = json.loads((tmp_path / "bomb.json").read_text())
    header.pop("npz_sha256")
    (tmp_path / "bomb.json").write_text(json.dumps(header))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"bomb\.npz' holds the member 'junk\.npy', which its header does not list"):
        load(base)
    assert time.perf_counter() - start < 0.5  # inflating the 256 MB takes seconds


def write_members(path: Path, arrays: dict, *, declared: dict = {}, zero_bytes: dict = {}) -> None:
    """A .npz of ``arrays``, except that the members in ``declared`` carry that .npy header followed by
    ``zero_bytes[name]`` zero bytes (the size a member really has)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, value in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                if name not in declared:
                    np.lib.format.write_array(f, value)
                    continue
                np.lib.format.write_array_header_1_0(f, declared[name])
                left = zero_bytes[name]
                while left:
                    f.write(bytes(min(left, 1 << 22)))
                    left -= min(left, 1 << 22)


def test_a_member_whose_shape_or_size_does_not_fit_is_refused_before_it_is_inflated(run, tmp_path):
    base = run.save(tmp_path / "r")
    header = json.loads((tmp_path / "r.json").read_text())
    header.pop("npz_sha256")
    (tmp_path / "r.json").write_text(json.dumps(header))
    big = {"descr": "<f4", "fortran_order": False, "shape": (3, 2, 8 << 20)}  # 192 MB of loss, where (3, 2) belongs
    write_members(tmp_path / "r.npz", run.arrays, declared={"loss": big}, zero_bytes={"loss": 3 * 2 * (32 << 20)})
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"array 'loss' has shape \(3, 2, 8388608\); a 'run' record declares \(steps, k\)"):
        load(base)
    assert time.perf_counter() - start < 0.5
    small = {"descr": "<f4", "fortran_order": False, "shape": (3, 2)}
    write_members(tmp_path / "r.npz", run.arrays, declared={"loss": small}, zero_bytes={"loss": 16 << 20})
    with pytest.raises(ValueError, match=r"member 'loss\.npy' is \d+ bytes, but its header declares shape \(3, 2\)"):
        load(base)


def test_a_memory_limit_is_one_sentence_naming_the_file(run, tmp_path):
    base = run.save(tmp_path / "big")
    n = 48 << 20  # examples: x and y of the data set declare 192 MB each, a shape the kind allows
    shapes = {"x": {"descr": "<f4", "fortran_order": False, "shape": (n, 1)},
              "y": {"descr": "<f4", "fortran_order": False, "shape": (n, 1)}}
    write_members(tmp_path / "big.npz", run.arrays, declared=shapes, zero_bytes={"x": 4 * n, "y": 4 * n})
    header = json.loads((tmp_path / "big.json").read_text())
    header.pop("npz_sha256")
    (tmp_path / "big.json").write_text(json.dumps(header))
    out = child("""
        import resource
        used = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (used + (96 << 20), resource.RLIM_INFINITY))
        try:
            schema.load(sys.argv[1])
        except MemoryError as e:
            print(e)
    """, str(base))
    if "VmSize" in out.stderr or not Path("/proc/self/status").exists():
        pytest.skip("this platform has no /proc/self/status to set a memory limit from")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == (f"path {str(tmp_path / 'big.npz')!r} holds 384 MiB of arrays, more memory than this "
                                  "process could get to read them.")


@pytest.mark.parametrize("field, value, words", [
    ("k", "2", "metadata field 'k' is \"2\", of type str; a 'run' record declares it int."),
    ("date", 5, "metadata field 'date' is 5, of type int; a 'run' record declares it str."),
    ("host", {}, "metadata field 'host' is {}, of type dict; a 'run' record declares it str."),
    ("all_reduce", 1, "metadata field 'all_reduce' is 1, of type int; a 'run' record declares it bool."),
    ("steps", True, "metadata field 'steps' is true, of type bool; a 'run' record declares it int."),
])
def test_metadata_of_the_wrong_type_is_refused_on_load(run, tmp_path, field, value, words):
    base = run.save(tmp_path / "r")
    header = json.loads((tmp_path / "r.json").read_text())
    header["meta"][field] = value
    (tmp_path / "r.json").write_text(json.dumps(header))
    with pytest.raises(ValueError) as refused:
        load(base)
    assert str(refused.value) == f"path {str(tmp_path / 'r.npz')!r}: {words}"
    with pytest.raises(ValueError, match=f"metadata field '{field}' is"):
        Run({**run.meta, field: value}, run.arrays)


def test_metadata_typed_as_declared_still_loads(run, tmp_path):
    base = run.save(tmp_path / "r")
    header = json.loads((tmp_path / "r.json").read_text())
    header["meta"].update(lr=1, global_batch=None)  # an int where a float is declared; null where "int or null"
    (tmp_path / "r.json").write_text(json.dumps(header))
    assert load(base).lr == 1.0 and load(base).meta["global_batch"] is None


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_saved_files_take_the_umask(run, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        run.save(tmp_path / "shared")
    finally:
        os.umask(old)
    assert [oct(p.stat().st_mode & 0o777) for p in sorted(tmp_path.iterdir())] == [oct(mode)] * 2


# --- 3. a save is all or nothing ---

KILLED_BETWEEN_RENAMES = """
    real, done = os.replace, []
    def replace(src, dst):
        real(src, dst)
        done.append(dst)
        if len(done) == 1:  # the new .npz is in place, its header not yet
            os.kill(os.getpid(), signal.SIGKILL)
    schema.os.replace = replace
    run = schema.load(sys.argv[1])
    Run(run.meta, {**run.arrays, "t_compute": run.arrays["t_compute"] + 1}).save(sys.argv[2])
"""


def test_a_save_killed_between_its_renames_leaves_a_whole_record(run, tmp_path):
    old = run.save(tmp_path / "source")
    base = changed(run, t_compute=run.t_compute * 2).save(tmp_path / "r")
    out = child(KILLED_BETWEEN_RENAMES, str(old), str(base))
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    left = [n for n in names(tmp_path) if n.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(".r.") and left[0].endswith(".json.tmp")  # the header, whole
    loaded = load(base)  # the new .npz with its own header: the new record, whole
    assert np.array_equal(loaded.t_compute, run.t_compute + 1) and loaded.check()
    assert names(tmp_path) == ["r.json", "r.npz", "source.json", "source.npz"]  # the header was put in place
    header = json.loads((tmp_path / "r.json").read_text())  # and numpy alone now reads a matching pair
    with np.load(tmp_path / "r.npz", allow_pickle=False) as z:
        assert sorted(z.files) == header["arrays"] and np.array_equal(z["t_compute"], run.t_compute + 1)


def test_a_reader_waits_for_a_live_save_s_renames_and_never_sees_a_mixed_pair(run, tmp_path):
    old = run.save(tmp_path / "source")
    base = changed(run, t_compute=run.t_compute * 2).save(tmp_path / "r")
    marker = tmp_path / "between"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        from dpviz.engine import schema
        from dpviz.topics.ground_floor.records import Run
        real, done = os.replace, []
        def replace(src, dst):
            real(src, dst)
            done.append(dst)
            if len(done) == 1:  # between the renames, holding the folder's lock, for a second
                open(sys.argv[3], "w").close()
                time.sleep(1.0)
        schema.os.replace = replace
        run = schema.load(sys.argv[1])
        Run(run.meta, {**run.arrays, "t_compute": run.arrays["t_compute"] + 1}).save(sys.argv[2])
    """), str(old), str(base), str(marker)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert writer.poll() is None and time.monotonic() < deadline, "the writer never reached its renames"
            time.sleep(0.01)
        loaded = load(base)  # during the writer's second between its renames
        assert np.array_equal(loaded.t_compute, run.t_compute + 1) and loaded.check()
        assert writer.wait(timeout=60) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert names(tmp_path) == ["between", "r.json", "r.npz", "source.json", "source.npz"]


KILLED_WHILE_WRITING = """
    real = schema.write_npz
    def write_npz(f, arrays):
        f.write(b"\\0" * 100_000)  # part of the archive, then the process is killed
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    schema.write_npz = write_npz
    run = schema.load(sys.argv[1])
    run.save(sys.argv[2])
"""


def test_a_save_killed_while_writing_leaves_the_old_record_and_its_litter_goes_at_the_next_load(run, tmp_path):
    base = run.save(tmp_path / "r")
    before = {n: (tmp_path / n).read_bytes() for n in names(tmp_path)}
    out = child(KILLED_WHILE_WRITING, str(base), str(base))
    assert out.returncode == -signal.SIGKILL, out.stderr[-2000:]
    litter = [n for n in names(tmp_path) if n.endswith(".tmp")]
    assert len(litter) == 1 and litter[0].startswith(".r.") and litter[0].endswith(".npz.tmp")
    assert (tmp_path / litter[0]).stat().st_size >= 100_000
    assert np.array_equal(load(base).loss, run.loss)  # the older record loads, and the load removed the litter
    assert {n: (tmp_path / n).read_bytes() for n in names(tmp_path)} == before
    child(KILLED_WHILE_WRITING, str(base), str(base))
    run.save(tmp_path / "other")  # a save of another record in the folder removes it too
    assert not [n for n in names(tmp_path) if n.endswith(".tmp")]


def test_only_stale_temporary_files_are_removed(run, tmp_path):
    base = run.save(tmp_path / "r")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = schema._host()
        live = tmp_path / f".r.{host}-{sleeper.pid}-0123abcd.npz.tmp"  # a save in progress in a live process
        elsewhere = tmp_path / f".r.{'0' * 8 if host != '0' * 8 else '1' * 8}-1-0123abcd.npz.tmp"  # another host's
        young = tmp_path / ".r.x8_k2m4q.npz.tmp"  # what an earlier dpviz (mkstemp) left, an hour old or less
        old = tmp_path / ".r.a1b2c3d4.json.tmp"  # the same, older than an hour
        unrelated = tmp_path / ".notes.tmp"
        for path in (live, elsewhere, young, old, unrelated):
            path.write_bytes(b"partial")
        hour_ago = time.time() - schema.STALE_SECONDS - 60
        os.utime(old, (hour_ago, hour_ago))
        load(base)
        assert not old.exists()
        assert all(p.exists() for p in (live, elsewhere, young, unrelated))
        os.utime(elsewhere, (hour_ago, hour_ago))
        sleeper.kill()
        sleeper.wait()
        load(base)
        assert not live.exists() and not elsewhere.exists() and young.exists() and unrelated.exists()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_concurrent_saves_to_one_name_end_with_one_whole_record(run, tmp_path):
    source = run.save(tmp_path / "source")
    writers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys
        from dpviz.engine import schema
        from dpviz.topics.ground_floor.records import Run
        run = schema.load(sys.argv[1])
        for i in range(5):
            Run({**run.meta, "seed": int(sys.argv[3])}, {**run.arrays, "loss": run.arrays["loss"] + int(sys.argv[3])}).save(sys.argv[2])
    """), str(source), str(tmp_path / "r"), str(i)], cwd=ROOT) for i in range(4)]
    try:
        assert [w.wait(timeout=120) for w in writers] == [0] * 4
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
    loaded = load(tmp_path / "r")
    assert np.array_equal(loaded.loss, run.loss + loaded.meta["seed"])  # the header and arrays of one save
    assert names(tmp_path) == ["r.json", "r.npz", "source.json", "source.npz"]


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs, mounted for the test and unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here to fill: {mounted.stderr.strip() or 'mount failed'}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_one_sentence_with_the_path_and_the_space_needed(run, small_disk):
    base = run.save(small_disk / "r")
    rng = np.random.default_rng(0)
    big = changed(run, x=rng.standard_normal((300_000, 1)).astype(np.float32),
                  y=rng.standard_normal((300_000, 1)).astype(np.float32))  # 2.4 MB that deflate cannot shrink
    with pytest.raises(RecordSaveError) as refused:
        big.save(base)
    error = refused.value
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC
    assert str(error).startswith(f"no space left to save the record at {str(base)!r}: it needs up to 2.")
    assert str(error).endswith("are free; any older record there is untouched.") and "\n" not in str(error)
    assert names(small_disk) == ["r.json", "r.npz"]  # no temporary file
    assert np.array_equal(load(base).loss, run.loss) and load(base).check()


# --- 5. load("") ---

def test_a_path_that_names_no_record_is_one_sentence():
    for path in ("", ".", ".npz"):
        with pytest.raises(ValueError, match=r"^path '.*' names no record: give a record's name, such as 'runs/k4' "
                                             r"for runs/k4\.npz and runs/k4\.json\.$"):
            load(path)
    with pytest.raises(TypeError, match=r"^path must be a str or a path naming a record, such as 'runs/k4'; got NoneType\.$"):
        load(None)
