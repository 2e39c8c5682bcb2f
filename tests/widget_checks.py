"""One check shared by every widget's tests: a blitted frame looks like a full draw of the same state."""

import io

import numpy as np
from PIL import Image


def decode(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"), dtype=np.int16)


def assert_blit_is_right(sf, what: str, *, skip_legends: bool = False) -> None:
    """The frame the widget just sent, drawn over its cached background, against two full draws of the same state.

    Against ``sf.png(full=True)`` (a fresh background): no artist that update() changed was left out of the
    animated set. Against a plain draw with nothing animated: the animated artists, drawn last, cover nothing
    they were below in the figure as built. A pixel differs if a channel is off by more than 16 of 255; up to
    0.05 % and 0.02 % of them may. ``skip_legends`` leaves the legends' boxes out of the second comparison, for
    figures whose frameless legends stay in the background while a curve or label may run into them.
    """
    blitted = decode(sf.image.value)
    animated = [a for a in sf.fig.findobj() if a.get_animated() and a is not sf.fig]
    assert animated, "the widget marks the artists its update changes"
    for artist in animated:
        artist.set_animated(False)
    try:
        sf.fig.canvas.draw()
        plain = np.asarray(sf.fig.canvas.buffer_rgba(), dtype=np.int16).copy()
    finally:
        for artist in animated:
            artist.set_animated(True)
    legends = np.zeros(plain.shape[:2], bool)
    if skip_legends:
        renderer, height = sf.fig.canvas.get_renderer(), plain.shape[0]
        for ax in sf.fig.axes:
            x0, y0, x1, y1 = ax.get_legend().get_window_extent(renderer).extents
            legends[int(height - y1):int(np.ceil(height - y0)) + 1, int(x0):int(np.ceil(x1)) + 1] = True
    full = decode(sf.png(full=True))
    for name, other, share, skip in (("a full redraw", full, 5e-4, False), ("a plain draw", plain, 2e-4, legends)):
        assert other.shape == blitted.shape
        differ = (np.abs(other - blitted).max(axis=2) > 16) & ~skip
        assert differ.mean() <= share, f"{what}: {differ.sum()} pixels of the blitted frame differ from {name}"
