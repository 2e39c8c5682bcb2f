"""Splitting the model: pipeline, tensor, sharded optimizer state: the library code of the notebook ``splitting_the_model``.

* ``claims``: Splitting the model: what the chapter prints and its figures' titles say, from their records (numpy
  only).
* ``deck``: Self-check cards for splitting the model: pipeline stages, tensor-parallel layers, and sharded optimizer
  state.
* ``figures``: Splitting the model's figures: pipeline Gantt charts and the bubble, a tensor-parallel layer,
  ZeRO-1's memory.
* ``plots_pipeline``: Pipeline parallelism: the Gantt chart of one step, and the idle share against the bubble
  formula.
* ``plots_tensor_parallel``: Tensor parallelism: one linear layer's matrices cut into blocks, coloured by the rank
  that holds them.
* ``plots_zero``: Sharded optimizer state: the memory each rank holds, and the parameters of both trainings side by
  side.
* ``rank_pipeline``: The rank side of :mod:`dpviz.topics.splitting.run_pipeline`: one stage per rank, activations
  and gradients sent point to point.
* ``rank_tensor_parallel``: The rank side of :mod:`dpviz.topics.splitting.run_tensor_parallel`: one linear layer
  split over k ranks, in torch.
* ``rank_zero``: The rank side of :mod:`dpviz.topics.splitting.run_zero`: plain data parallelism, then ZeRO-1, in
  each of k ranks, in torch.
* ``records_pipeline``: The record of a pipelined training step: when every stage ran every pass, and what came out.
* ``records_tensor_parallel``: The record of one linear layer split over k ranks, by columns and by rows, forward
  and backward.
* ``records_zero``: The record of plain data parallelism beside sharded optimizer state (ZeRO stage 1), on the same
  data.
* ``run_figures``: Record, on this machine, the runs behind the chapter's published figures (the torch side of
  ``./run`` for them).
* ``run_pipeline``: Pipeline parallelism for real: an MLP's layers cut into p stages on p ranks, one training step
  on m micro-batches.
* ``run_tensor_parallel``: Tensor parallelism for real: one linear layer ``Y = X W`` split over k ranks, by columns
  and by rows.
* ``run_zero``: Sharded optimizer state (ZeRO stage 1) beside plain data parallelism, in the same k ranks, with
  Adam.
* ``theory_memory``: What one rank must hold in memory to train: parameters, gradients and optimizer state, with and
  without sharding.
* ``theory_pipeline``: Pipeline parallelism in numbers: the order each stage works in, the modeled timeline, and the
  bubble.
* ``theory_tensor_parallel``: Tensor parallelism in bytes: what splitting one linear layer over k ranks makes them
  exchange.
* ``widget``: The chapter's slider: the Gantt chart of a real pipelined step for every p, m and schedule shipped with
  dpviz.
"""
