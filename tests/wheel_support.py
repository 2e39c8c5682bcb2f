"""The built wheel, installed into a fresh environment outside the checkout (shared by test_wheel and test_browser).

The wheel is built from this checkout and installed, without its dependencies, into a new virtual environment;
the dependencies (torch, numpy, matplotlib, Jupyter) come from this environment's site-packages through a path
entry, which adds them to ``sys.path`` without running this environment's editable-install hook, so ``import
dpviz`` in that environment finds the wheel and never the checkout.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(wheels: Path) -> Path:
    """Build the wheel of this checkout into ``wheels`` and return it.

    From a copy of the package's sources in ``wheels``/src (the figure records' link followed), so that two
    sessions building at once share no build/ folder, and no module left in build/ by an older build is packed.
    """
    src = wheels / "src"
    shutil.copytree(ROOT / "dpviz", src / "dpviz", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, cwd=wheels, timeout=600)
    (wheel,) = wheels.glob("dpviz-*.whl")
    return wheel


def install_wheel(base: Path) -> Path:
    """Build the wheel into ``base``/wheel and install it into ``base``/env; return that environment's python."""
    wheels = base / "wheel"
    wheels.mkdir(parents=True)
    wheel = build_wheel(wheels)
    env_dir = base / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "dependencies-from-the-test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True, timeout=600)
    return python


def write_kernelspec(kernels: Path, python: Path, name: str = "python3") -> Path:
    """A kernelspec ``name`` under ``kernels`` that starts ``python``'s ipykernel; returns its folder.

    Found first by Jupyter when ``kernels`` is ``$JUPYTER_DATA_DIR/kernels`` or under ``$JUPYTER_PATH``, so the
    chapters' ``python3`` kernel is the wheel's environment, not this one.
    """
    folder = kernels / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (the dpviz wheel)", "language": "python"}))
    return folder


def use_wheel_kernel(env: dict, python: Path) -> None:
    """Make a Jupyter server started with ``env`` run its ``python3`` kernels on ``python`` (the wheel's).

    The kernelspec goes under ``env``'s JUPYTER_DATA_DIR, which Jupyter must search before this virtual
    environment's own ``share/jupyter`` (JUPYTER_PREFER_ENV_PATH=0); nothing of this environment's paths is
    passed on to the kernel.
    """
    write_kernelspec(Path(env["JUPYTER_DATA_DIR"]) / "kernels", python)
    env["JUPYTER_PREFER_ENV_PATH"] = "0"
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
