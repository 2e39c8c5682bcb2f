"""Figures: ``plot_*(data, *, ax=None, **style) -> Axes``, one module per figure family; they draw, never compute."""
