"""An installed package is enough: the built wheel, in a fresh environment outside the checkout, runs every chapter.

The wheel and its environment are conftest's ``wheel_python`` (:mod:`wheel_support`): built once per session.
The chapters are copied alone into a temporary folder and executed there on that environment's kernel, two at
a time; a chapter that reads ``../figures/records`` or anything else of the checkout fails. When the browser
test runs in the same session it already runs every chapter that way (JupyterLab's ``python3`` kernel is the
wheel's, and it serves a copy of notebooks/ alone), so the run here is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from browser_support import find_chromium
from wheel_support import write_kernelspec

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def run_in(python, code: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_the_wheel_is_what_imports_and_it_holds_no_solutions(wheel_python, tmp_path):
    where = run_in(wheel_python, "import dpviz, dpviz.engine.paths as p; print(dpviz.__file__); "
                              "print(len(list(p.FIGURE_RECORDS.glob('*.json'))))", tmp_path)
    assert where.returncode == 0, where.stderr
    path, count = where.stdout.split()
    assert not Path(path).resolve().is_relative_to(ROOT), f"dpviz came from the checkout: {path}"
    assert int(count) == len(list((ROOT / "figures" / "records").glob("*.json")))  # the figure records, packaged
    solutions = run_in(wheel_python, "from dpviz.exercises.solutions import sgd_step", tmp_path)
    assert solutions.returncode != 0 and "ModuleNotFoundError" in solutions.stderr


def test_every_chapter_runs_from_the_wheel_with_the_notebooks_alone(wheel_python, tmp_path, request):
    if find_chromium() and any(item.path.name == "test_browser.py" and item.name.startswith("test_chapter_in_jupyterlab")
                               for item in request.session.items):
        pytest.skip("the browser test in this session runs every chapter in JupyterLab on this wheel's kernel, from "
                    "a copy of notebooks/ alone (it checks the kernel's python); no second run here")
    copy = tmp_path / "notebooks"
    copy.mkdir()
    for chapter in CHAPTERS:
        shutil.copy(chapter, copy / chapter.name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["JUPYTER_PATH"] = str(tmp_path / "jupyter")  # this environment's kernel, not one registered elsewhere
    write_kernelspec(tmp_path / "jupyter" / "kernels", wheel_python)

    def execute(chapter: Path):
        done = subprocess.run([str(wheel_python), "-m", "nbconvert", "--to", "notebook", "--execute",
                               "--ExecutePreprocessor.timeout=300", "--ExecutePreprocessor.kernel_name=python3",
                               "--output", f"{chapter.stem}.run.ipynb", chapter.name],
                              capture_output=True, text=True, cwd=copy, env=env, timeout=900)
        return chapter.name, done.returncode, done.stderr[-1500:]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(execute, [copy / c.name for c in CHAPTERS]))
    failed = [f"{name}: {err}" for name, code, err in results if code != 0]
    assert not failed, "chapters that failed from the wheel:\n" + "\n\n".join(failed)
