"""The speedup model: the library code of the notebook ``speedup_model``.

* ``claims``: The speedup model's chapter: what its figures claim in their titles, checked on the numbers they draw
  (numpy only).
* ``deck``: Self-check cards for the speedup model: the limits of S, faster links, and the best k.
* ``figure_records``: The records behind the derivation's published figures (Steps 1 to 6, s01, s02, the all-reduce
  sweep, the summary).
* ``figures``: The speedup model's figures: s01's sync timelines and s02's speedup curves, from the derivation's
  records.
* ``plots_speedup``: Figure s02: speedup S against the number of devices k, modeled for three links and measured
  here.
* ``plots_timeline``: Step 6 and figure s01: one step's time on k devices, as a solid lavender compute bar and a
  lined coral sync bar.
* ``records``: The record of an all-reduce benchmark: measured seconds per call over k, message size M and
  implementation.
* ``widget``: The speedup model: what the sync costs, with sliders for k, α, β, M and T_compute.
"""
