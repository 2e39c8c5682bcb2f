"""One deck of self-check cards per chapter, each module named by its topic, each card beside the function that
computes its numbers. :mod:`dpviz.teaching.questionbank` puts them together in chapter order.

* ``ground_floor``          00  every symbol
* ``one_step``              01  one training step
* ``mini_batch``            02  a mini-batch
* ``average_of_averages``   03  the average of averages
* ``one_group_per_device``  04  one group per device
* ``all_reduce``            05  all-reduce; the notes' formula against the ring's
* ``sync_costs``            06  the speedup model
* ``measuring``             07  measuring an all-reduce
* ``whole_picture``         08  the whole picture
* ``bigger_batch``          09  a bigger batch wants a bigger step
* ``accumulation``          10  gradient accumulation
* ``waiting``               11  stragglers, overlap, asynchronous SGD
* ``splitting``             12  pipeline, tensor, sharded optimizer state
* ``sharding``              13  ZeRO-2, ZeRO-3 and FSDP: what a rank holds and sends
* ``cheaper_sync``          14  compression, local SGD, two levels of links
* ``review``                13  the question bank: every chapter reviewed
* ``review_numbers``        13  the question bank's numeric cards
"""
