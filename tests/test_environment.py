"""environment.yml lists the same packages, with the same version ranges, as pyproject.toml; an installed dpviz has its data."""

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


def test_torch_is_capped_at_a_release_that_2_13_0_satisfies():
    from packaging.specifiers import SpecifierSet

    spec = dict(pyproject_requirements())["torch"]
    assert "2.13.0" in SpecifierSet(spec)
    assert "2.14.0" not in SpecifierSet(spec)


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

