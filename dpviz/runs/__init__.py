"""The torch side: ranks that run, and the only writers of records.

* :mod:`dpviz.runs.launch`        start k ranks of a process group; errors and stalls named by rank
* :mod:`dpviz.runs.forkserver`    the fork server ranks start from: started by the first run or :func:`warm_up`
* :mod:`dpviz.runs.supervise`     waiting on running ranks: failures and stalls named, every child reaped
* :mod:`dpviz.runs.rank`          what runs inside a rank: tied to its parent's life, joins the group, runs the worker
* :mod:`dpviz.runs.where`         the where-it-ran metadata every record kind declares, filled once
* :mod:`dpviz.runs.recipes`       which recorder makes which figure plan's records (the torch side of ./run)
* :mod:`dpviz.runs.training`      the data-parallel rank worker, ``record_run``, the torchrun entry point
* :mod:`dpviz.runs.ranks`         the rank side of each run module: its worker and torch helpers, imported in ranks only
* :mod:`dpviz.runs.model_sizes`   the built-in models' names and parameter counts, torch-free, for configs
* :mod:`dpviz.runs.buckets`       gradients grouped into DDP's buckets, torch-free (chapter 11's overlap)
* :mod:`dpviz.runs.models`        the line model and the MLP
* :mod:`dpviz.runs.optim`         SGD, momentum and Adam written out, bit-identical to torch.optim
* :mod:`dpviz.runs.collectives`   the ring all-reduce and a parameter server, by hand
* :mod:`dpviz.runs.bench`         the all-reduce benchmark worker and sweep
* :mod:`dpviz.runs.schedule`      recording a hand-written all-reduce's transfers
* :mod:`dpviz.runs.shipped`       recording again the runs shipped for the sliders
* :mod:`dpviz.runs.figure_inputs` recording every run behind the published figures
* :mod:`dpviz.runs.pipeline`      pipeline stages over point-to-point sends, timed pass by pass (chapter 12)
* :mod:`dpviz.runs.tensor_parallel` a linear layer split by columns and by rows over k ranks (chapter 12)
* :mod:`dpviz.runs.zero`          plain data parallelism beside sharded Adam state, ZeRO-1 (chapter 12)
* :mod:`dpviz.runs.splitting`     recording the runs behind chapter 12's figures
* :mod:`dpviz.runs.straggler`     one rank sleeps a delay d before the all-reduce; everyone's moments recorded (chapter 11)
* :mod:`dpviz.runs.overlap`       all-reduces started from backward hooks: per parameter, one buffer, buckets; DDP timed (chapter 11)
* :mod:`dpviz.runs.async_sgd`     a parameter server and k workers, asynchronous or synchronous, with staleness (chapter 11)
* :mod:`dpviz.runs.waiting`       chapter 11's live runs in one launch, its figure records and its shipped runs

Each run module above is a torch-free front: its config is checked, and its record assembled with
numpy, in the caller's process, while its worker (in :mod:`dpviz.runs.ranks`) runs in the ranks. So a
chapter's kernel never imports torch for a run; torch is imported by the fork server and the ranks.

Importing this package starts no process. A chapter's set-up cell calls :func:`warm_up`, so the
fork server imports torch while the student reads, and the first live run starts at once.
"""

from dpviz.runs.forkserver import warm_up

__all__ = ["warm_up"]
