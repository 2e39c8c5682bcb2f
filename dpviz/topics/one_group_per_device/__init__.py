"""One group per device: the library code of the notebook ``one_group_per_device``.

* ``claims``: One group per device: with the sync the replicas stay together, without it they part (numpy only).
* ``deck``: Self-check cards for one group per device: what each device holds and computes before any sync.
* ``figures``: Step 4's figure: k device boxes, one θ, different slices, different arrows.
* ``plots``: Step 4: one group per device.
* ``plots_all_reduce``: Step 5: the all-reduce, drawn from real runs and a real recorded schedule.
* ``run_shipped``: Record again the runs shipped in ``dpviz/records/shipped_runs/`` (the sliders of this chapter and of
  all-reduce).
* ``shipped``: Real runs recorded once and shipped in ``dpviz/records/shipped_runs/``, so that sliders never wait
  for one.
* ``widget``: Sliders for this chapter and all-reduce: move k, b and the step across runs that were recorded for real.
"""
