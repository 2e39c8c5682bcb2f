"""Measuring an all-reduce: the library code of the notebook ``measuring_an_all_reduce``.

* ``alpha_beta``: α and β fitted to all-reduce times, how far the fit misses each point, and when the fit is to be
  trusted.
* ``deck``: Self-check cards for measuring an all-reduce: the two bandwidths a benchmark prints, fitting α and β, and
  when to trust them.
* ``hand_fit``: α and β set by hand against the fit's own points: the model's times, measured / modeled, and the
  RMS miss the fit minimises.
* ``figures``: The speedup model's figures: s01's sync timelines, s02's speedup curves, all-reduce time against M.
* ``plots_alpha_beta``: All-reduce times with their fitted α-β lines, and the residual panel that says how far the
  fit misses.
* ``plots_bench``: Measured all-reduce time against message size M, a colour and a marker per k, with the fitted
  cost models.
* ``rank_bench``: The rank side of :mod:`dpviz.topics.measuring.run_bench`: each rank times ``dist.all_reduce``, the
  ring and the parameter server.
* ``records``: All-reduce times that others measured on real multi-GPU systems and published, with the source of
  every point.
* ``run_bench``: Measure all-reduce time over k and message size M, and fit the cost model to it.
* ``widget``: The chapter's slider: α and β moved by hand against this machine's measured times, the fitted pair
  marked, the residual shown.
"""
