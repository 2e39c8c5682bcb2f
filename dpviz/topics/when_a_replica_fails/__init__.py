"""When a replica fails: a killed rank, checkpoint and restart, the Young/Daly interval, carrying on with fewer
ranks and regrowing, DiLoCo: the library code of the chapter ``when_a_replica_fails``.

* ``claims``: What the chapter prints about a restart, a shrink and regrow, the Young/Daly check and DiLoCo,
  asserted on the runs (numpy only).
* ``checkpoints``: A checkpoint on disk, written all or nothing (a temporary file, flushed, renamed into place).
* ``deck``: self-check cards on what a dead rank does to the
  others, Young's interval, what a restart must restore, a shrunk group's average, DiLoCo's bytes.
* ``rank_diloco``: The rank side of ``run_diloco``: plain data parallelism, local SGD and DiLoCo from the same θ0 on
  the same batches, in torch.
* ``rank_failure``: The rank side of ``run_failure``: data-parallel SGD with momentum that checkpoints, is killed
  (a real SIGKILL), resumes, shrinks and regrows, in torch; also a script for torchrun's elastic restart.
* ``run_diloco``: Sync rarely: DiLoCo beside local SGD and plain data parallelism on real ranks, bytes per step.
* ``run_failure``: A real SIGKILL in one of k ranks; restart from the last checkpoint (dpviz's launcher, or
  torchrun's ``--max-restarts``); carry on with k − 1 and regrow; runs at several checkpoint intervals meeting
  failures at one rate (the Young/Daly check).
* ``theory``: The Young/Daly interval √(2·δ·MTBF), the time a failure costs, a Poisson schedule of failures, and
  the numpy oracle of DiLoCo's outer step (numpy only).
"""
