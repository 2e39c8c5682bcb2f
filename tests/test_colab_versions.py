"""Colab's versions: the built wheel installs beside Colab's published set without changing any of it, every slider
panel moves under ipywidgets 7, and every chapter runs.

A fresh environment outside the checkout gets Colab's releases of what dpviz stands on (:data:`COLAB`: ipywidgets
7.7.1, matplotlib 3.10, numpy 2.0, IPython 7.34, ipykernel 6.17, the classic Notebook 6.5 and no JupyterLab) and the
torch ``./run`` installs, as ``./run`` chooses its build (Colab's own torch is a CUDA build of its own choosing), then
the wheel, its dependencies resolved by pip as ``pip install dpviz`` resolves them in Colab. The front ends (Colab's
page, VS Code's notebook editor) are not driven here: the widgets' Python side and the chapters' kernels are.

Installing takes one to two minutes from pip's cache and the chapters two to three more (at a load of 4 to 12 on 2
cores), so the module's environment is made once (a module-wide fixture), and conftest sends the module out first.
It is skipped, saying so, where pip cannot fetch from the package index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest
from wheel_support import build_wheel

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Colab's runtime as published (research.google.com/colaboratory: its pip list), the parts dpviz touches
COLAB = {"ipywidgets": "7.7.1", "matplotlib": "3.10.0", "numpy": "2.0.2", "ipython": "7.34.0", "ipykernel": "6.17.1",
         "notebook": "6.5.7"}
ALSO = ["nbclient", "nbformat", "pytest"]  # the chapters' runner; tests/test_widget_panels.py's PANELS
NOT_THERE = ("jupyterlab", "voila")


def pip(*args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)


def installed(python: Path) -> dict:
    listing = pip("--python", str(python), "list", "--format=json", timeout=120)
    assert listing.returncode == 0, listing.stderr
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(listing.stdout)}


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel 6.17's debugger warns of frozen modules on every start
    return env


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """A fresh environment with Colab's versions, then the wheel: its python, and what it held before and after."""
    base = tmp_path_factory.mktemp("colab")
    probe = pip("download", "--no-deps", "--dest", str(base / "probe"), f"ipywidgets=={COLAB['ipywidgets']}",
                timeout=300)
    if probe.returncode != 0:
        pytest.skip(f"pip cannot fetch Colab's ipywidgets {COLAB['ipywidgets']} here, so Colab's versions are not "
                    f"tested: {(probe.stderr.strip().splitlines() or ['no reason given'])[-1]}")
    venv.EnvBuilder(with_pip=False).create(base / "env")
    python = base / "env" / "bin" / "python"
    # the torch ./run installs, from where ./run takes it (its CPU build on a machine without a GPU; pip's cache
    # holds it from ./run's own install)
    torch = subprocess.run(["bash", "-c", 'source ./run && echo "$TORCH_RELEASE" && torch_index'], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    release, *index = torch.stdout.split()
    pins = [f"{name}=={version}" for name, version in COLAB.items()]
    done = pip("--python", str(python), "install", "-q", *index, *pins, f"torch=={release}", *ALSO)
    assert done.returncode == 0, done.stderr[-3000:]
    before = installed(python)
    wheel = build_wheel(base / "wheel")
    done = pip("--python", str(python), "install", "-q", str(wheel))  # dependencies as pip resolves them in Colab
    assert done.returncode == 0, done.stderr[-3000:]
    return python, before, installed(python)


def test_the_wheel_installs_beside_colabs_versions_and_changes_none_of_them(colab):
    python, before, after = colab
    assert {name: before.get(name) for name in COLAB} == COLAB
    changed = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert not changed, f"installing dpviz changed these (before, after): {changed}"
    assert "dpviz" in after and not set(NOT_THERE) & set(after), sorted(after)


# Run in Colab's environment: every panel of tests/test_widget_panels.py, built as its chapter builds it; each control
# moved by setting its value, as the front end does, which runs the observe callback and one redraw each time.
PANEL_MOVES = textwrap.dedent("""
    import json, math, sys
    sys.path.insert(0, sys.argv[1])
    import ipywidgets, matplotlib
    matplotlib.use("Agg")
    from test_widget_panels import PANELS, _moves
    import numpy as np
    from widget_checks import decode

    def same(a, b):
        return a == b or isinstance(a, float) and math.isclose(a, b, rel_tol=1e-9)

    report = {"versions": [ipywidgets.__version__, matplotlib.__version__], "panels": {}}
    for name, build in PANELS.items():
        sf = build()
        moved, redrawn = 0, 0
        for move in _moves(sf, 2):
            (key, value), = move.items()
            if same(sf.controls[key].value, value):  # a linked control's move already put it there: nothing to send
                continue
            drawn = len(sf.timings)
            sf.controls[key].value = value
            assert same(sf.values[key], value), (name, move, sf.values[key])  # a log slider may round its last bit
            moved += 1
            redrawn += len(sf.timings) - drawn
        shown, full = decode(sf.image.value), decode(sf.png(full=True))  # the last frame against a full draw
        differ = float((np.abs(shown - full).max(axis=2) > 16).mean()) if shown.shape == full.shape else 1.0
        bundle, _ = sf._repr_mimebundle_()
        view = bundle["application/vnd.jupyter.widget-view+json"]
        report["panels"][name] = {"moved": moved, "redrawn": redrawn, "errors": len(sf.errors.outputs),
                                  "differ": differ, "shown": view["model_id"] == sf.widget.model_id
                                  and "image/png" in bundle}
    print(json.dumps(report))
""")


def test_every_panel_moves_and_redraws_under_ipywidgets_7(colab, tmp_path):
    python = colab[0]
    done = subprocess.run([str(python), "-c", PANEL_MOVES, str(ROOT / "tests")], capture_output=True, text=True,
                          cwd=tmp_path, env=clean_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["versions"] == [COLAB["ipywidgets"], COLAB["matplotlib"]]
    from test_widget_panels import PANELS

    assert set(report["panels"]) == set(PANELS)
    wrong = {name: r for name, r in report["panels"].items()
             if not (r["moved"] > 0 and r["redrawn"] == r["moved"] and r["errors"] == 0 and r["shown"]
                     and r["differ"] <= 5e-4)}  # widget_checks' bound: 0.05 % of the pixels
    assert not wrong, f"panels that did not answer every move with one redraw, a frame as drawn, or a view: {wrong}"


# Run in Colab's environment: each chapter executed on that environment's own kernel, two at a time.
RUN_CHAPTERS = textwrap.dedent("""
    import json, sys, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    import nbformat
    from nbclient import NotebookClient

    def run(path):
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        try:
            NotebookClient(nb, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
        except Exception as error:
            return path.name, {"error": str(error)[-2000:]}
        views = sum("application/vnd.jupyter.widget-view+json" in out.get("data", {})
                    for cell in nb.cells for out in cell.get("outputs", []))
        return path.name, {"seconds": round(time.perf_counter() - start, 1), "widget_views": views}

    with ThreadPoolExecutor(2) as pool:
        print(json.dumps(dict(pool.map(run, sorted(Path(".").glob("[0-9][0-9]_*.ipynb"))))))
""")


def test_every_chapter_runs_on_colabs_versions(colab, tmp_path):
    python = colab[0]
    for chapter in CHAPTERS:  # the chapters alone: nothing of the checkout beside them
        shutil.copy(chapter, tmp_path / chapter.name)
    env = clean_env()
    env["JUPYTER_PATH"] = str(tmp_path / "jupyter")  # no kernel registered elsewhere: python3 is this environment's
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter-data")
    done = subprocess.run([str(python), "-c", RUN_CHAPTERS], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(results) == [c.name for c in CHAPTERS]
    failed = {name: r["error"] for name, r in results.items() if "error" in r}
    assert not failed, "chapters that failed on Colab's versions:\n" + "\n\n".join(f"{n}: {e}"
                                                                                for n, e in failed.items())
    assert results["06_speedup_model.ipynb"]["widget_views"] > 0, "chapter 06 showed no live slider panel"
    print("seconds per chapter on Colab's versions:", {n[:2]: r["seconds"] for n, r in results.items()})
