"""Shard everything: ZeRO-2, ZeRO-3 and FSDP: the library code of the notebook ``shard_everything``.

* ``claims``: Shard everything: what the chapter prints of ZeRO stages 0 to 3 (FSDP), from their records (numpy
  only).
* ``deck``: Self-check cards for shard everything: ZeRO-2, ZeRO-3 and FSDP, what each rank holds and what it sends.
* ``figures``: Shard everything's figures: memory per rank at each ZeRO stage, bytes sent per step, measured beside
  the model, and one rank's bytes held through one ZeRO-3 step as it gathers and frees each layer.
* ``plots``: Shard everything: what one rank holds at each ZeRO stage, and what it sends per step, measured beside
  the model.
* ``rank_sharding``: The rank side of :mod:`dpviz.topics.sharding.run_sharding`: one MLP trained at ZeRO stages 0 to
  3 in the same k ranks, in torch.
* ``records``: The record of one MLP trained with Adam at ZeRO stages 0 to 3 (FSDP) in the same k ranks, on the same
  data.
* ``run_sharding``: Shard everything: one MLP trained with Adam at ZeRO stages 0, 1, 2 and 3 (FSDP) in the same k
  gloo ranks.
* ``theory``: Sharding everything (ZeRO stages 0 to 3, FSDP): what one rank holds at each phase of a step, what it
  sends, and the time.
* ``widget``: Chapter "shard everything"'s slider panel: memory per rank and bytes per step for k, the ZeRO stage,
  the model's size and its precision, and where the model stops fitting a device.
"""
