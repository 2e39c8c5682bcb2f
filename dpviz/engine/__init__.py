"""The engine: what every chapter stands on, naming no chapter.

Launching ranks (fork server, supervision, the rank side), records (schema, plans, paths, tolerance), the
slider base and its canvas, figure layout and style, the sandbox for student code and the wording of its
verdicts, and the self-check cards. A topic (``dpviz/topics/<topic>/``) imports the engine; the engine imports
no topic (``tests/test_layers.py``).

* ``canvas``: What a slider frame is made of besides Agg's blit: layers blended onto it, and the PNG it goes out as.
* ``cards``: A self-check card: a question, its answer, its chapter and kind; numeric cards compute their numbers.
* ``checks``: Argument checks shared by every public entry point.
* ``confine``: Where student code runs with no rights: an unprivileged user, a mount namespace that shows no course,
  and limits.
* ``cores``: How many cores a cgroup's CPU quota lets this process use (``launch.cpu_count`` takes the smaller of
  it and the affinity mask).
* ``data``: Built-in data sets: generated from a seed, never downloaded.
* ``figure_group``: A figure group: one chapter's published figures, the plan of records they are drawn from, and
  its claims.
* ``forkserver``: The fork server ranks start from: when it starts, when it stops, and how to tell it from a rank.
* ``launch``: Start k ranks of a torch.distributed process group and collect what each returns.
* ``layout``: What every published figure shares: a bare matplotlib Figure that carries a one-line caption naming
  its runs.
* ``paths``: Where records live: ``dpviz/records/``, the package's data folder (records only, no code).
* ``plan``: A figure plan: the records one chapter's published figures are drawn from, by stem, with their settings.
* ``predict``: Predict, then run: a question the reader answers before a real run, and the run's answer after it.
* ``quiz``: Self-check cards: a question, a hidden answer, and a button that reveals it.
* ``rank``: The rank side of a launch: what runs inside each of the k processes :func:`dpviz.engine.launch.launch`
  starts.
* ``sandbox``: The one sandbox for a reader's function: in a fresh process for the notebook's checks, in the ranks
  for collectives.
* ``schema``: How a record kind is declared, written, read and checked: one table per kind, everything else from it.
* ``server_exit``: The fork server leaves at once when it ends, without tearing down an interpreter that imported
  torch.
* ``server_start``: The fork server leaves with its launcher even while it is still importing torch.
* ``slider``: The one pattern every interactive figure follows, and the helpers the widgets share.
* ``style``: The notes' palette and the small drawing conventions every figure shares.
* ``supervise``: Watching k running ranks from the launching process: failures and stalls named by rank, every child
  reaped.
* ``svg_compare``: Compare two SVG files as drawings: the same elements, attributes and text, every number equal
  within a tolerance.
* ``tolerance``: How closely two float32 gradients must agree to count as the same: the one tolerance every check
  uses.
* ``verdict``: What a checker answers: a :class:`Verdict` (a string that knows whether it passed), and the helpers
  every checker shares to compare a reader's numbers with the real ones and to word the answer.
* ``where``: Where and how a run ran: the metadata fields a record kind declares from
  ``dpviz.engine.schema.RAN_ON``.
"""
