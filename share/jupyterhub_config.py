"""A course's JupyterHub for the dpviz chapters: every student a Unix user of their own, nbgrader's exchange on.

    sudo mkdir -p /srv/nbgrader/exchange && sudo chmod 1777 /srv/nbgrader/exchange     # nbgrader's exchange
    sudo DPVIZ_HUB_RECORDS=/srv/dpviz/records .venv/bin/jupyterhub -f share/jupyterhub_config.py

Run it as root from the environment dpviz is installed in (``./run`` makes ``.venv``): JupyterHub's own
authenticator (PAM, the machine's passwords) logs students in, and its ``LocalProcessSpawner`` starts each
one's Jupyter server as that student's own Unix user, with this environment's Python, so their kernels, their
ranks and their files are theirs. configurable-http-proxy (``npm install configurable-http-proxy``) must be on
PATH, or named by ``c.ConfigurableHTTPProxy.command``. Add students with ``useradd``, list them in
``c.Authenticator.allowed_users`` (or ``allow_all``) and the instructor in ``admin_users``, below or in a file of
your own that loads this one (``load_subconfig("share/jupyterhub_config.py")``), as ``tests/test_hub.py`` does.

What it sets, each from the environment the hub starts in:

- ``DPVIZ_HUB_RECORDS``: the course's records folder, which the chapters read (their ``DPVIZ_RECORDS``),
  for instance the instructor's ``./run`` output, ``my_figures/records``, copied there. Keep it writable by
  the instructor alone: students read it (a plan that it lacks falls back to the records shipped inside dpviz).
- ``DPVIZ_HUB_EXCHANGE``: nbgrader's exchange folder (default ``/srv/nbgrader/exchange``), mode 1777, and
  the course id ``dpviz``, both given to nbgrader by ``share/nbgrader/nbgrader_config.py``, which every
  server and the instructor's nbgrader read (``JUPYTER_CONFIG_PATH``).

Capacity: ``benchmarks/bench_hub.py`` measures how many students a core serves (see benchmarks/HISTORY.md).
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub defines it)

SHARE = Path(__file__).resolve().parent
ENV_BIN = Path(sys.executable).parent  # the environment the hub runs from, dpviz's

c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"  # a server per student, as that Unix user
c.Spawner.cmd = [str(ENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"

# A class logs in at once: on a busy machine a server (and the first kernel's torch) takes longer than the
# defaults of 10 s (http_timeout) and 60 s (start_timeout).
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 300

c.Spawner.environment = {
    "DPVIZ_RECORDS": os.environ.get("DPVIZ_HUB_RECORDS", ""),  # empty: the records shipped inside dpviz
    "DPVIZ_NBGRADER_EXCHANGE": os.environ.get("DPVIZ_HUB_EXCHANGE", "/srv/nbgrader/exchange"),
    "JUPYTER_CONFIG_PATH": str(SHARE / "nbgrader"),  # nbgrader's exchange and course id
}

# Kernels talk to their server over Unix sockets in the student's own runtime folder, not TCP ports on the
# loopback: the server picks a kernel's five ports before the kernel binds them, and with a class of servers
# starting kernels (and ranks opening gloo's connections) at once, another process took one in between; the
# kernel then died at its start ("Address already in use"), and its restart asked for the same ports again.
# A socket's path, HOME/.local/share/jupyter/runtime/kernel-<36-character id>-ipc-N, must fit in 107 bytes:
# a home folder's path of at most 28 characters (/home/ and a name of up to 22).
c.Spawner.args = ["--KernelManager.transport=ipc"]
