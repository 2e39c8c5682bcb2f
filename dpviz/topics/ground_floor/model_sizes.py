"""The built-in models' names and sizes, without torch, so that a config can check its model in the caller's process.

:mod:`dpviz.topics.ground_floor.rank_models` builds them.
"""

MODELS = ("line", "mlp")  # the line model (w, c) and the MLP
FULL_PARAMS_LIMIT = 20_000  # parameters; above this a training run keeps only digests of each replica


def count_params(model: str, *, d_in: int = 16, width: int = 64, depth: int = 2) -> int:
    """P, the parameters of the model :func:`dpviz.topics.ground_floor.rank_models.build_model` builds with these arguments, counted
    without building it: 2 for the line, each Linear layer's weights and biases for the MLP."""
    if model == "line":
        return 2
    hidden = d_in * width + width + (depth - 1) * (width * width + width)
    return hidden + width + 1
