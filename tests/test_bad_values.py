"""Every value is refused before a rank starts (issue 44, section 4), and what a run cannot vouch for is not saved.

Each option of ``python -m dpviz record`` and ``bench`` (and ``figures``' two paths) is tried at its extremes (0, negative, the stated maximum
plus one, inf, nan, 1e308, integers past int64): each ends in one sentence naming the option and its range, exit
status 2, with no fork server started, so no rank ever ran. The Python API refuses the same values with a
ValueError or TypeError. The stated maxima themselves record real runs. A run that fails its own check exits 1
and saves nothing; a save the disk cannot take is one sentence, exit 1, and the older record still loads.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import psutil
import pytest

from dpviz.cli import main
from dpviz.engine.forkserver import fork_server_pid, stop_fork_server

HUGE = str(2**70)

# (arguments, words the one sentence must hold): each value at or past an end of its option's range.
CLI_CASES = [
    *[(["record", "--k", v], "--k must be an integer from 1 to ") for v in ("0", "-1", "1025", "513", "1e308", "inf", "nan", HUGE, "2.5")],
    *[(["record", "--b", v], "--b must be an integer from 1 to 128") for v in ("0", "-1", "129", "1e308", HUGE)],
    *[(["record", "--global-batch", v], "--global-batch must be") for v in ("0", "513", "10", "inf", HUGE)],
    *[(["record", "--steps", v], "--steps must be an integer from 1 to 100000") for v in ("0", "-1", "100001", "1e308", HUGE)],
    *[(["record", "--model", "mlp", "--width", v], "--width must be") for v in ("0", "65537", "nan", HUGE)],
    (["record", "--model", "mlp", "--width", "65536", "--depth", "64"], "--width must be at most 434 with depth=64"),
    *[(["record", "--depth", v], "--depth must be an integer from 1 to 64") for v in ("0", "65", "-inf")],
    *[(["record", "--lr", v], "--lr must be a number > 0 and <= 1000") for v in ("0", "-1", "1000.001", "inf", "-inf", "nan", "1e308")],
    *[(["record", "--seed", v], "--seed must be an integer from 0 to 4294967295")
      for v in ("-1", "4294967296", "9223372036854775807", HUGE, "1.5", "inf")],
    *[(["record", "--timeout", v], "--timeout must be a number > 0 and <= 86400")
      for v in ("0", "-1", "86400.5", "inf", "-inf", "nan", "1e308", "-1e308")],
    *[(["record", "--threads", v], "--threads must be an integer from 1 to 4096") for v in ("0", "4097", HUGE, "inf")],
    *[(["record", "--shard-sizes", v], "--shard-sizes") for v in ("0,1,1,1", "1,1,1", "600,1,1,1", "1,1,1,x", "inf,1,1,1", "200,200,200,1")],
    *[(["record", f"--{name}", "x"], f"--{name} must be one of") for name in ("model", "optimizer", "mean", "sampling", "backend")],
    *[(["bench", "--ks", *v], "--ks must") for v in (["0"], ["1"], ["1025"], ["inf"], [HUGE], ["2", "2"])],
    *[(["bench", "--min-bytes", v], "--min-bytes must be an integer from 4 to 1073741820") for v in ("0", "3", "-1", str(2**30), "inf", HUGE)],
    *[(["bench", "--max-bytes", v], "--max-bytes must be an integer from 1028 to 1073741824") for v in ("4", "1024", str(2**30 + 1), "inf", HUGE)],
    *[(["bench", "--points", v], "--points must be an integer from 2 to 64") for v in ("0", "1", "-1", "65", "inf", HUGE)],
    *[(["bench", "--repeats", v], "--repeats must be an integer from 1 to 10000") for v in ("0", "10001", "nan", HUGE)],
    (["bench", "--impls", "x"], "--impls must be one of"),
    (["bench", "--impls", "ring"], "--impls must include all_reduce"),
    (["bench", "--backend", "x"], "--backend must be one of"),
    (["record", "--out", ""], "--out must name a record, such as runs/k4"),
    (["bench", "--out", "."], "--out must name a record, such as runs/k4"),
    (["figures", "--out", ""], "--out '' cannot be written"),
    (["figures", "--out", tempfile.gettempdir(), "--from-records", ""], "--from-records '' is not a folder of records"),
]


def descendants() -> set:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture
def no_rank_may_start():
    """Around a call that must refuse its arguments: no fork server runs before it, and none after (every launch
    starts one before its first rank), nor any other process."""
    stop_fork_server()  # one left idling by an earlier test in this process
    assert fork_server_pid() is None
    before = descendants()
    yield
    assert fork_server_pid() is None, "a fork server started: a rank was about to start"
    assert descendants() <= before


@pytest.mark.parametrize("args, words", CLI_CASES, ids=[" ".join(args) for args, _ in CLI_CASES])
def test_every_option_at_its_extremes_is_one_sentence_and_exit_2(args, words, capsys, no_rank_may_start):
    assert main(args) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith(f"python -m dpviz {args[0]}: error: "), err
    assert words in err, err
    assert err.count("\n") == 1 and err.rstrip().endswith("."), err  # one line, one sentence
    assert captured.out == ""


def run_module(*args, timeout=240, **kwargs):
    return subprocess.run([sys.executable, "-m", "dpviz", *args], capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.mark.parametrize("args", [["record", "--timeout", "inf"], ["record", "--lr", "1e308"],
                                  ["record", "--seed", "9223372036854775807"], ["bench", "--points", "1"]],
                         ids=lambda args: " ".join(args))
def test_the_issues_values_end_the_process_with_status_2(args):
    """The four values of the issue that started ranks (and ended in their tracebacks), as a user types them."""
    done = run_module(*args, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stdout == ""


def api_cases():
    from dpviz.topics.accumulation.run_accumulation import AccumConfig, record_accumulation
    from dpviz.topics.all_reduce.run_schedule import record_schedules
    from dpviz.topics.bigger_batch.run_lr_sweep import record_lr_grid
    from dpviz.topics.cheaper_sync.run_compression import record_compression
    from dpviz.topics.cheaper_sync.run_hierarchical import record_hierarchical
    from dpviz.topics.cheaper_sync.run_local_sgd import record_local_sgd
    from dpviz.topics.ground_floor.run_probing import probe_every_knob
    from dpviz.topics.ground_floor.run_training import TrainConfig, record_run
    from dpviz.topics.measuring.run_bench import BenchConfig, run_sweep
    from dpviz.topics.sharding.run_sharding import record_sharding
    from dpviz.topics.splitting.run_pipeline import PipelineConfig, record_pipeline, record_pipelines
    from dpviz.topics.splitting.run_tensor_parallel import record_tensor_split
    from dpviz.topics.splitting.run_zero import record_zero
    from dpviz.topics.waiting.run_async_sgd import record_async
    from dpviz.topics.waiting.run_overlap import record_overlap
    from dpviz.topics.waiting.run_straggler import record_straggler
    from dpviz.topics.whole_picture.run_batchnorm import record_batchnorm

    inf, seed = float("inf"), 2**63 - 1

    def edited(config, **fields):
        """A config made with good values, then given a bad one (a notebook cell may do that)."""
        for name, value in fields.items():
            setattr(config, name, value)
        return config

    return [
        (lambda: record_run(edited(TrainConfig(), lr=inf)), "lr must be"),
        (lambda: record_accumulation([edited(AccumConfig(), seed=seed)]), "seed must be"),
        (lambda: record_pipelines([edited(PipelineConfig(), stall_timeout=inf)]), "stall_timeout must be"),
        (lambda: record_run(stall_timeout=inf), "stall_timeout must be a number > 0 and <= 86400"),
        (lambda: record_run(stall_timeout=1e308), "stall_timeout must be"),
        (lambda: record_run(lr=1e308), "lr must be a number > 0 and <= 1000"),
        (lambda: record_run(lr=inf), "lr must be"),
        (lambda: record_run(lr=10**400), "lr must be"),  # an int past float's range
        (lambda: record_run(seed=seed), "seed must be an integer from 0 to 4294967295"),
        (lambda: record_run(model="mlp", width=65536, depth=64), "width must be at most"),
        (lambda: record_run(model="mlp", d_in=65536, dataset_size=1 << 20), "dataset_size must be at most"),
        (lambda: record_run(dataset_size=2**40), "dataset_size must be an integer from 1 to 1048576"),
        (lambda: record_accumulation([dict(lr=inf)]), "lr must be"),
        (lambda: record_accumulation([dict(seed=seed)]), "seed must be"),
        (lambda: record_schedules(2, 8, seed=seed), "seed must be"),
        (lambda: record_schedules(2, 8, stall_timeout=inf), "stall_timeout must be"),
        (lambda: record_lr_grid(base_lr=1e308), "base_lr must be"),
        (lambda: record_lr_grid(multipliers=(1.0, 1e308)), "multipliers entries must be a number > 0 and <= 100000"),
        (lambda: record_lr_grid(examples=10**18), "examples must be an integer from 1 to"),
        (lambda: record_lr_grid(seed=seed), "seed must be"),
        (lambda: record_lr_grid(stall_timeout=inf), "stall_timeout must be"),
        (lambda: record_compression(lr=inf), "lr must be"),
        (lambda: record_compression(seed=2**32), "seed must be"),
        (lambda: record_hierarchical(stall_timeout=1e308), "stall_timeout must be"),
        (lambda: record_local_sgd(lr=1e308), "lr must be"),
        (lambda: probe_every_knob(h=1e308), "h must be a number > 0 and <= 1"),
        (lambda: probe_every_knob(seed=seed), "seed must be"),
        (lambda: run_sweep(BenchConfig(ks=(2,), sizes=(4, 8), stall_timeout=inf)), "stall_timeout must be"),
        (lambda: run_sweep(BenchConfig(ks=(2,), sizes=(4, 8), repeats=2**62)), "repeats must be an integer from 1 to 10000"),
        (lambda: record_sharding(lr=inf), "lr must be"),
        (lambda: record_pipeline(seed=seed), "seed must be"),
        (lambda: record_pipeline(batch=2**40), "batch must be"),
        (lambda: record_tensor_split(seed=seed), "seed must be"),
        (lambda: record_tensor_split(d_in=2**40), "d_in must be"),
        (lambda: record_zero(stall_timeout=inf), "stall_timeout must be"),
        (lambda: record_async(seed=seed), "seed must be"),
        (lambda: record_async(max_staleness=2**62), "max_staleness must be an integer from 0 to 60"),
        (lambda: record_overlap(lr=1e308), "lr must be"),
        (lambda: record_straggler(seed=seed), "seed must be"),
        (lambda: record_batchnorm(lr=inf), "lr must be"),
        (lambda: record_batchnorm(dataset_size=2**40), "dataset_size must be"),
    ]


@pytest.mark.parametrize("index", range(len(api_cases())))
def test_the_python_api_refuses_the_same_values_before_any_rank_starts(index, no_rank_may_start):
    call, words = api_cases()[index]
    with pytest.raises((ValueError, TypeError)) as refused:
        call()
    text = str(refused.value)
    assert text.startswith(words), text
    assert "\n" not in text and text.endswith(".")


def test_the_widest_mlp_named_is_accepted_and_one_more_is_refused():
    from dpviz.topics.ground_floor.run_training import TrainConfig

    with pytest.raises(ValueError, match=r"^width must be at most 1,304 with depth=64, d_in=16, k=2 and steps=1: "):
        TrainConfig(model="mlp", k=2, steps=1, width=65536, depth=64)
    assert TrainConfig(model="mlp", k=2, steps=1, width=1304, depth=64).width == 1304
    with pytest.raises(ValueError, match=r"^width must be at most 1,304 "):
        TrainConfig(model="mlp", k=2, steps=1, width=1305, depth=64)


def test_the_stated_maxima_record_real_runs(tmp_path, no_leftover_processes):
    """The top of every range that a small run can reach: the run starts, trains, passes its check and saves."""
    from dpviz.topics.ground_floor.records import Run

    done = run_module("record", "--k", "2", "--b", "4", "--steps", "2", "--seed", "4294967295", "--timeout", "86400",
                      "--lr", "1000", "--out", str(tmp_path / "top"))
    assert done.returncode == 0, done.stderr[-2000:]
    run = Run.load(tmp_path / "top")
    assert (run.meta["seed"], run.meta["lr"]) == (4294967295, 1000.0)
    assert "verified: " in done.stdout

    done = run_module("bench", "--ks", "2", "--points", "2", "--min-bytes", "4", "--max-bytes", "8", "--repeats", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Fit(formula='ring'" in done.stdout  # the fit that `--points 1` once failed after the sweep


def test_a_run_that_fails_its_own_check_exits_1_and_saves_nothing(tmp_path, no_leftover_processes):
    """lr = 1000, the top of its range, sends the line model's loss past float32 within a few steps: NaN follows,
    the run's check fails, and the older record at --out stays as it was."""
    from dpviz.topics.ground_floor.records import Run

    out = tmp_path / "run"
    assert run_module("record", "--k", "2", "--b", "4", "--steps", "2", "--out", str(out)).returncode == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    done = run_module("record", "--k", "2", "--b", "4", "--steps", "30", "--lr", "1000", "--out", str(out))
    assert done.returncode == 1, done.stderr[-2000:]
    assert "CHECK FAILED: " in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m dpviz record: the run failed its own check") and "try a smaller --lr" in last
    assert f"nothing was saved to {str(out)!r}" in last and "Traceback" not in done.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert Run.load(out).steps == 2


FULL_DISK = """
set -e
mount -t tmpfs -o size={size} dpviz-full-disk {disk}
cp {old}.npz {old}.json {disk}/
head -c {size} /dev/zero > {disk}/filler 2>/dev/null || true  # the disk is now full
set +e
{python} -m dpviz record --k 2 --b 4 --steps 2 --out {disk}/old
echo "exit status $?"
{python} -c "from dpviz.topics.ground_floor.records import Run; print('old record loads:', Run.load('{disk}/old').steps)"
"""


def test_a_full_disk_is_one_sentence_and_exit_1_and_the_old_record_loads(tmp_path, no_leftover_processes):
    """A real full disk: a small tmpfs, mounted in a mount namespace of its own (``unshare``), so that nothing
    outside the test sees it."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unshare here to mount a small tmpfs")
    old = tmp_path / "old"
    assert run_module("record", "--k", "2", "--b", "4", "--steps", "2", "--out", str(old)).returncode == 0
    disk = tmp_path / "disk"
    disk.mkdir()
    script = FULL_DISK.format(size="256k", disk=disk, old=old, python=sys.executable)
    done = subprocess.run(["unshare", "-rm", "sh", "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert "exit status 1" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "old record loads: 2" in done.stdout, done.stdout + done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m dpviz record: ") and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "space" in last and f"{disk}/old" in last and last.endswith("."), last


@pytest.mark.parametrize("args, words", [(["--lr", "inf"], "--lr must be a number > 0 and <= 1000; got inf."),
                                         (["--seed", str(2**63 - 1)], "--seed must be an integer from 0 to 4294967295"),
                                         (["--dataset-size", "0"], "--dataset-size must be an integer from 1 to 1048576")],
                         ids=["lr", "seed", "dataset-size"])
def test_under_torchrun_each_rank_refuses_a_bad_value_before_it_imports_torch(args, words, tmp_path):
    """What torchrun starts: the environment it gives each rank, and a value the ranks could not use."""
    code = ("import sys; from dpviz.topics.ground_floor.run_training import main\n"
            "try:\n    main(sys.argv[1:])\nfinally:\n    print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, *args, "--out", str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "RANK": "0", "WORLD_SIZE": "2"})
    assert done.returncode == 2
    assert done.stderr.startswith(f"python -m dpviz.topics.ground_floor.run_training: error: {words}"), done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == "False\n"  # one sentence, and torch never imported
