"""The command line: help for every command, a real recorded run, one-sentence errors with exit status 2.

Help and drawing from saved records import no torch (``benchmarks/bench_imports.py`` times ``--help``).
"""

import subprocess
import sys
from dataclasses import fields

import pytest

from dpviz.cli import RECORD_DEFAULTS, main
from dpviz.topics.ground_floor.records import Run


def dpviz(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "dpviz", *args], capture_output=True, text=True, timeout=timeout)


def dpviz_importing(*args, timeout=180):
    """``python -m dpviz ARGS`` under ``-X importtime``: the finished process (its stderr without the
    import lines) and the set of modules it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "dpviz", *args],
                          capture_output=True, text=True, timeout=timeout)
    imported, rest = set(), []
    for line in done.stderr.splitlines():
        if line.startswith("import time:"):
            imported.add(line.rsplit("|", 1)[1].strip())
        else:
            rest.append(line)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, "\n".join(rest)), imported


LAUNCH_SIDE = ("dpviz.engine.launch", "dpviz.engine.forkserver", "dpviz.engine.supervise", "dpviz.engine.rank",
               "dpviz.engine.where", "dpviz.engine.server_exit", "dpviz.recipes")


def torch_layer(imported: set) -> list:
    """torch (not its hundreds of submodules) and the run side of dpviz among ``imported``: the engine's launcher,
    the recipes, and every topic's ``run_*`` and ``rank_*`` modules."""
    return sorted(m for m in imported if m == "torch" or m in LAUNCH_SIDE
                  or m.startswith("dpviz.topics.") and m.rsplit(".", 1)[-1].startswith(("run_", "rank_")))


@pytest.mark.parametrize("args", [[], ["record"], ["bench"], ["figures"]], ids=["dpviz", "record", "bench", "figures"])
def test_help_imports_no_torch(args):
    command = " ".join(["python -m dpviz", *args])
    done, imported = dpviz_importing(*args, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: " + command in done.stdout
    assert not torch_layer(imported), f"{command} --help imported {torch_layer(imported)}"


def test_drawing_from_records_imports_no_torch(tmp_path):
    """An empty folder: the command imports all that drawing needs, then stops at the first missing record.

    (Drawing the whole set takes half a minute; tests/test_figures.py does it, and tests/test_layers.py
    checks that nothing the drawing imports, inside functions included, reaches torch.)
    """
    records = tmp_path / "records"
    records.mkdir()
    done, imported = dpviz_importing("figures", "--from-records", str(records), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("python -m dpviz figures: error: ") and str(records) in done.stderr
    assert "torch" not in imported, f"drawing from records imported {torch_layer(imported)}"


def test_record_help_shows_the_defaults_of_train_config():
    from dpviz.topics.ground_floor.run_training import TrainConfig

    defaults = {f.name: f.default for f in fields(TrainConfig)}
    unknown = sorted(set(RECORD_DEFAULTS) - set(defaults))
    assert not unknown, f"RECORD_DEFAULTS names {unknown}, which are not fields of TrainConfig"
    assert RECORD_DEFAULTS == {name: defaults[name] for name in RECORD_DEFAULTS}


def test_record_prints_what_it_verified_and_saves(tmp_path, no_leftover_processes):
    done = dpviz("record", "--k", "2", "--b", "4", "--steps", "2", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bit-identical" in done.stdout and "big-batch gradient" in done.stdout
    assert Run.load(tmp_path / "run").k == 2


def test_drift_is_reported_without_all_reduce(no_leftover_processes):
    done = dpviz("record", "--k", "2", "--b", "4", "--steps", "2", "--no-all-reduce")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "replicas differ in 2 of 3 recorded states" in done.stdout


def test_a_stalled_rank_ends_with_status_1_and_names_the_ranks(no_leftover_processes):
    # no rank can finish a step in a microsecond; 2000 steps outlast many of the launcher's 20 ms polls, so one
    # of them sees it (with 3 steps the run could end between two polls)
    done = dpviz("record", "--k", "2", "--steps", "2000", "--timeout", "1e-6")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "python -m dpviz record: rank" in done.stderr and "stalled" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args, name",
    [
        (["record", "--k", "0"], "--k must be"),
        (["record", "--k", "3", "--global-batch", "10"], "--global-batch must be a multiple of k=3"),
        (["record", "--backend", "carrier-pigeon"], "--backend must be one of"),
        (["record", "--lr", "-1"], "--lr must be"),
        (["record", "--width", "0"], "--width must be an integer from 1 to 65536; got 0"),
        (["record", "--depth", "-1"], "--depth must be an integer from 1 to 64; got -1"),
        (["record", "--seed", "-1"], "--seed must be an integer from 0 to"),
        (["record", "--k", "1024"], "--k must be an integer from 1 to 512 (dataset_size"),
        (["record", "--steps", "100000", "--model", "mlp"], "--steps must be at most 7,763 for this model and k"),
        (["record", "--shard-sizes", "3,0,2,2"], "--shard-sizes entries must be"),
        (["bench", "--ks", "0"], "--ks must be"),
        (["bench", "--repeats", "0"], "--repeats must be"),
        (["bench", "--min-bytes", "2"], "--min-bytes must be an integer from 4"),
        (["bench", "--min-bytes", "4096", "--max-bytes", "1024"], "--max-bytes must be an integer from 4100"),
        (["bench", "--points", "0"], "--points must be an integer from 2 to 64"),
    ],
)
def test_bad_arguments_exit_2_with_one_sentence(args, name, capsys):
    # in this process: each is refused before any rank starts, and torch is imported once, not once per case
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m dpviz {args[0]}: error: ") and name in err
    assert err.strip().count("\n") == 0  # one line, no traceback


def test_version_comes_from_the_package_metadata_without_torch():
    import importlib.metadata

    done, imported = dpviz_importing("--version")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == f"dpviz {importlib.metadata.version('dpviz')}\n"
    assert not torch_layer(imported), f"--version imported {torch_layer(imported)}"


def test_a_bad_argument_ends_the_process_with_status_2():
    done = dpviz("record", "--k", "0")
    assert done.returncode == 2
    assert "k must be" in done.stderr
    assert done.stderr.strip().count("\n") == 0


def test_an_unusable_out_is_refused_before_any_rank_starts(tmp_path, capsys):
    (tmp_path / "x.npz").mkdir()  # OUT.npz already a folder
    assert main(["record", "--out", str(tmp_path / "x")]) == 2
    assert "is already there and is not a file" in capsys.readouterr().err
    (tmp_path / "plain").write_text("a file, not a folder")
    assert main(["figures", "--out", str(tmp_path / "plain" / "figs")]) == 2
    assert "cannot be written" in capsys.readouterr().err
    assert main(["figures", "--from-records", str(tmp_path / "nowhere"), "--out", str(tmp_path / "f")]) == 2
    assert "is not a folder of records" in capsys.readouterr().err
