"""environment.yml lists the same packages, with the same version ranges, as pyproject.toml; the core requirements
admit the versions students have; an installed dpviz has its data; ./run takes torch's CPU build unless there is a GPU."""

import re
import tomllib
from pathlib import Path

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

