"""The average of averages: the library code of the notebook ``average_of_averages``.

* ``claims``: The average of averages: equal groups give the big-batch gradient, unequal ones need a weighted mean
  (numpy only).
* ``deck``: Self-check cards for the average of averages: where b cancels, unequal groups, and rounding.
* ``figures``: Step 3's figure: all b·k arrows averaged at once beside the mean of the k group means.
* ``plots``: Step 3: the mean of all b·k examples equals the mean of the k group means.
* ``widget``: Step 3 with sliders for k and b: regroup one recorded big batch and compare the two means.
"""
