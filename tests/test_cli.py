"""The command line: help for every command, a real recorded run, one-sentence errors with exit status 2."""

import subprocess
import sys

import pytest

from dpviz.records.run import Run


def dpviz(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "dpviz", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", ["record", "bench", "figures"])
def test_help(command):
    done = dpviz(command, "--help")
    assert done.returncode == 0
    assert "usage: python -m dpviz " + command in done.stdout


def test_record_prints_what_it_verified_and_saves(tmp_path, no_leftover_processes):
    done = dpviz("record", "--k", "2", "--b", "4", "--steps", "2", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bit-identical" in done.stdout and "big-batch gradient" in done.stdout
    assert Run.load(tmp_path / "run").k == 2


def test_drift_is_reported_without_all_reduce(no_leftover_processes):
    done = dpviz("record", "--k", "2", "--b", "4", "--steps", "2", "--no-all-reduce")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "replicas differ in 2 of 3 recorded states" in done.stdout


@pytest.mark.parametrize(
    "args, name",
    [
        (["record", "--k", "0"], "k must be"),
        (["record", "--k", "3", "--global-batch", "10"], "global_batch must be a multiple of k=3"),
        (["record", "--backend", "carrier-pigeon"], "backend must be one of"),
        (["record", "--lr", "-1"], "lr must be"),
        (["bench", "--ks", "0"], "ks must be"),
        (["bench", "--repeats", "0"], "repeats must be"),
    ],
)
def test_bad_arguments_exit_2_with_one_sentence(args, name):
    done = dpviz(*args)
    assert done.returncode == 2
    assert name in done.stderr
    assert done.stderr.strip().count("\n") == 0  # one line, no traceback
