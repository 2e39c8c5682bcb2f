"""Interactive figures: sliders that update one figure's artists in place."""

from dpviz.widgets.base import SliderFigure

__all__ = ["SliderFigure"]
