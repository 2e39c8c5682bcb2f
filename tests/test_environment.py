"""environment.yml lists the same packages, with the same version ranges, as pyproject.toml; the core requirements
admit the versions students have; an installed dpviz has its data; ./run takes torch's CPU build unless there is a GPU."""

import os
import platform
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def normalise(requirement: str) -> tuple[str, str]:
    name, spec = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", requirement).groups()
    return name.lower().replace("_", "-"), spec.replace(" ", "")


def pyproject_requirements() -> set:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    return {normalise(r) for r in reqs}


def conda_requirements() -> set:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    reqs = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            reqs += [r for r in dep["pip"] if not r.startswith("-e")]
        elif not dep.startswith(("python", "pip")) or dep.startswith(("pip-",)):
            reqs.append(dep)
    return {normalise(r) for r in reqs}


def test_environment_yml_matches_pyproject():
    assert conda_requirements() == pyproject_requirements()


def core_requirements() -> dict:
    return dict(normalise(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


# What the notebooks' usual homes carry (Colab's published set, a VS Code or JupyterHub image's, newer releases):
# every one must satisfy the core requirements, so that installing dpviz there changes none of them.
ADMITTED = {"ipywidgets": ["7.7.1", "8.1.5"], "matplotlib": ["3.8.0", "3.10.0", "3.11.2"],
            "numpy": ["1.26.4", "2.0.2", "2.4.0"], "torch": ["2.6.0", "2.13.0", "2.15.0"]}


def test_the_core_requirements_admit_the_versions_students_have_and_no_front_end():
    from packaging.specifiers import SpecifierSet

    core = core_requirements()
    refused = [f"{name} {version} (dpviz asks {core[name]})" for name, versions in ADMITTED.items()
               for version in versions if version not in SpecifierSet(core[name])]
    assert not refused, refused
    assert "2.5.1" not in SpecifierSet(core["torch"])  # torch.distributed.fsdp.fully_shard is public from 2.6
    front_ends = {"jupyterlab", "voila", "notebook", "sphinx", "myst-nb", "nbgrader"} & set(core)
    assert not front_ends, f"in the core requirements, not an extra: {front_ends}"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"jupyterlab", "voila"} <= {normalise(r)[0] for r in extras["lab"]}


def test_every_data_file_in_the_package_is_package_data():
    """A file under dpviz/ that is not Python is installed only if a package-data pattern names it."""
    import subprocess
    from fnmatch import fnmatch

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dpviz"]
    tracked = subprocess.run(["git", "ls-files", "dpviz"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    data = [path.removeprefix("dpviz/") for path in tracked.split() if not path.endswith(".py")
            and not (ROOT / path).is_symlink()]  # records/figure_runs: a link, whose files the patterns name
    assert data, "git lists no data files under dpviz/"
    missing = [path for path in data if not any(fnmatch(path, pattern) for pattern in patterns)]
    assert not missing, f"not installed with dpviz (add to [tool.setuptools.package-data]): {missing}"



def torch_choice(env: dict, tmp_path) -> subprocess.CompletedProcess:
    """./run's choice of torch build and pip arguments, its functions sourced in a shell with ``env`` added."""
    script = 'source ./run && echo "build=$(torch_build)" && echo "index=$(torch_index)"'
    return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("DPVIZ_TORCH")}, **env})


@pytest.fixture(scope="module")
def cpu_index(tmp_path_factory):
    """A stand-in for PyTorch's CPU index: an HTTP server on this machine with a torch/ page."""
    import functools
    import http.server
    import threading

    folder = tmp_path_factory.mktemp("index")
    (folder / "whl" / "cpu" / "torch").mkdir(parents=True)
    (folder / "whl" / "cpu" / "torch" / "index.html").write_text("<html></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    server.shutdown()
    server.server_close()
    thread.join()


def test_run_takes_torchs_cpu_build_unless_a_gpu_is_here_or_asked_for(cpu_index, tmp_path):
    assert platform.system() == "Linux"
    gpu_here = shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists()
    plain = torch_choice({"DPVIZ_TORCH_CPU_INDEX": cpu_index}, tmp_path)
    assert plain.returncode == 0, plain.stderr
    if not gpu_here:
        assert plain.stdout.split("\n")[:2] == ["build=cpu", f"index=--extra-index-url {cpu_index}"], plain.stdout
    asked = torch_choice({"DPVIZ_TORCH": "cuda", "DPVIZ_TORCH_CPU_INDEX": cpu_index}, tmp_path)
    assert asked.stdout.split("\n")[:2] == ["build=cuda", "index="], asked.stdout
    forced = torch_choice({"DPVIZ_TORCH": "cpu", "DPVIZ_TORCH_CPU_INDEX": cpu_index}, tmp_path)
    assert forced.stdout.split("\n")[:2] == ["build=cpu", f"index=--extra-index-url {cpu_index}"], forced.stdout
    fake = tmp_path / "bin"  # a machine with nvidia-smi on its PATH has a GPU: the default (CUDA) build
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (fake / "nvidia-smi").chmod(0o755)
    gpu = torch_choice({"PATH": f"{fake}:{os.environ['PATH']}", "DPVIZ_TORCH_CPU_INDEX": cpu_index}, tmp_path)
    assert gpu.stdout.split("\n")[:2] == ["build=cuda", "index="], gpu.stdout


def test_run_falls_back_to_pips_own_indexes_at_once_where_the_cpu_index_cannot_be_reached(tmp_path):
    import time

    start = time.perf_counter()
    refused = torch_choice({"DPVIZ_TORCH": "cpu", "DPVIZ_TORCH_CPU_INDEX": "http://127.0.0.1:9/whl/cpu"}, tmp_path)
    assert refused.stdout.split("\n")[:2] == ["build=cpu", "index="], refused.stdout
    assert "cannot be reached" in refused.stderr and time.perf_counter() - start < 10
    wrong = torch_choice({"DPVIZ_TORCH": "rocm"}, tmp_path)
    assert "expected cpu, cuda or auto" in wrong.stderr


def test_the_torch_release_run_installs_is_one_the_package_admits():
    from packaging.specifiers import SpecifierSet

    release = subprocess.run(["bash", "-c", 'source ./run && echo "$TORCH_RELEASE"'], cwd=ROOT, capture_output=True,
                             text=True, timeout=60).stdout.strip()
    assert release and release in SpecifierSet(core_requirements()["torch"]), release
