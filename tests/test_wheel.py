"""An installed package is enough: the built wheel, in a fresh environment outside the checkout, runs every chapter.

The wheel is built from this checkout and installed, without its dependencies, into a new virtual environment in a
temporary folder; the dependencies (torch, numpy, matplotlib, Jupyter) come from this environment's site-packages
through a path entry, which adds them to ``sys.path`` without running this environment's editable-install hook, so
``import dpviz`` finds the wheel and never the checkout. The chapters are copied alone into another temporary
folder and executed there, two at a time. A chapter that reads ``../figures/records`` or anything else of the
checkout fails here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    wheels = tmp_path_factory.mktemp("wheel")
    for stale in ("lib", "bdist.linux-x86_64"):  # setuptools would pack modules left there by an older build
        shutil.rmtree(ROOT / "build" / stale, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, cwd=wheels, timeout=600)
    (wheel,) = wheels.glob("dpviz-*.whl")
    env_dir = tmp_path_factory.mktemp("fresh-env")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "dependencies-from-the-test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, timeout=600)
    return python


def run_in(python, code: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_the_wheel_is_what_imports_and_it_holds_no_solutions(installed, tmp_path):
    where = run_in(installed, "import dpviz, dpviz.records.paths as p; print(dpviz.__file__); "
                              "print(len(list(p.FIGURE_RECORDS.glob('*.json'))))", tmp_path)
    assert where.returncode == 0, where.stderr
    path, count = where.stdout.split()
    assert not Path(path).resolve().is_relative_to(ROOT), f"dpviz came from the checkout: {path}"
    assert int(count) == len(list((ROOT / "figures" / "records").glob("*.json")))  # the figure records, packaged
    solutions = run_in(installed, "from dpviz.exercises.solutions import sgd_step", tmp_path)
    assert solutions.returncode != 0 and "ModuleNotFoundError" in solutions.stderr


def test_every_chapter_runs_from_the_wheel_with_the_notebooks_alone(installed, tmp_path):
    copy = tmp_path / "notebooks"
    copy.mkdir()
    for chapter in CHAPTERS:
        shutil.copy(chapter, copy / chapter.name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["JUPYTER_PATH"] = str(tmp_path / "jupyter")  # this environment's kernel, not one registered elsewhere
    kernel = tmp_path / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(installed), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "the wheel", "language": "python"}))

    def execute(chapter: Path):
        done = subprocess.run([str(installed), "-m", "nbconvert", "--to", "notebook", "--execute",
                               "--ExecutePreprocessor.timeout=300", "--ExecutePreprocessor.kernel_name=python3",
                               "--output", f"{chapter.stem}.run.ipynb", chapter.name],
                              capture_output=True, text=True, cwd=copy, env=env, timeout=900)
        return chapter.name, done.returncode, done.stderr[-1500:]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(execute, [copy / c.name for c in CHAPTERS]))
    failed = [f"{name}: {err}" for name, code, err in results if code != 0]
    assert not failed, "chapters that failed from the wheel:\n" + "\n\n".join(failed)
