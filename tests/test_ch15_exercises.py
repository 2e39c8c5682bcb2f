"""Chapter 15's exercises: Young's checkpoint interval (in a fresh process) and the average over the survivors (on
the 2 survivors of 3 real gloo ranks). Each checker accepts the reference and other correct forms, names each
typical mistake in a sentence, and stops a loop that never ends."""

import linecache

import pytest

from dpviz.exercises import check_survivor_average, check_young_daly_interval, failures
from dpviz.engine.verdict import FAILED, PASSED
from dpviz.grading import load_solutions

solutions = load_solutions()
STALL = 6.0  # seconds without progress before a launch is ended: short, so a hang costs the test little


def notebook_function(source: str, name: str):
    """Define ``name`` from ``source`` as a notebook cell does: IPython keeps the cell's text in linecache."""
    filename = f"<test cell {name} {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def young(body: str):
    return notebook_function(f"def young_daly_interval(delta, mtbf):\n    {body}\n", "young_daly_interval")


@pytest.mark.parametrize("body", ["return math.sqrt(2 * delta * mtbf)", "return (2 * delta * mtbf) ** 0.5",
                                  "return float(np.sqrt(2.0 * delta * mtbf))", "return math.sqrt(2 * mtbf * delta)",
                                  "return math.sqrt(2) * math.sqrt(delta) * math.sqrt(mtbf)"])
def test_young_daly_accepts_every_correct_form(body):
    verdict = check_young_daly_interval(young(body))
    assert verdict.passed and verdict.status == PASSED, verdict


def test_young_daly_accepts_the_reference():
    assert check_young_daly_interval(solutions.young_daly_interval).passed


@pytest.mark.parametrize("body, words", [
    ("return math.sqrt(delta * mtbf)", "without the factor 2"),
    ("return math.sqrt(delta * mtbf / 2)", "The 2 belongs under the root beside"),
    ("return 2 * delta * mtbf", "That is τ², not τ"),
    ("return math.sqrt(2 * delta / mtbf)", "both multiply"),
    ("return math.sqrt(2 * delta * mtbf) - delta", "Daly's refinement"),
])
def test_young_daly_names_each_typical_mistake(body, words):
    verdict = check_young_daly_interval(young(body))
    assert not verdict.passed and verdict.status == FAILED
    assert words in verdict, verdict
    assert "expected" in verdict  # and says what was expected, where


def test_young_daly_stops_a_loop_that_never_ends():
    verdict = check_young_daly_interval(young("while True:\n        pass"))
    assert not verdict.passed and "loop that never ends" in verdict, verdict


def survivor(body: str):
    return notebook_function("def survivor_average(model_grads, group):\n" + body, "survivor_average")


CORRECT = {
    "reference": solutions.survivor_average,
    "get_world_size(group=group)": survivor("    for g in model_grads:\n        dist.all_reduce(g, group=group)\n"
                                            "        g.div_(dist.get_world_size(group=group))\n"),
    "old k minus one": survivor("    n = dist.get_world_size() - 1\n    for g in model_grads:\n"
                                "        dist.all_reduce(g, op=dist.ReduceOp.SUM, group=group)\n        g /= n\n"),
    "one flat tensor": survivor("    flat = torch.cat([g.reshape(-1) for g in model_grads])\n"
                                "    dist.all_reduce(flat, group=group)\n    flat /= dist.get_world_size(group)\n"
                                "    i = 0\n    for g in model_grads:\n"
                                "        g.copy_(flat[i:i + g.numel()].view_as(g))\n        i += g.numel()\n"),
}


@pytest.mark.parametrize("name", list(CORRECT))
def test_survivor_average_accepts_every_correct_form(name):
    verdict = check_survivor_average(CORRECT[name], stall_timeout=STALL)
    assert verdict.passed, verdict
    assert "2 survivors of 3 real ranks" in verdict and "in one batch" in verdict


MISTAKES = [
    ("divided by the old k",
     "    for g in model_grads:\n        dist.all_reduce(g, group=group)\n        g /= dist.get_world_size()\n",
     "divided by 3, the old k"),
    ("no division", "    for g in model_grads:\n        dist.all_reduce(g, group=group)\n",
     "It is the sum over the 2 survivors"),
    ("over the whole world", "    for g in model_grads:\n        dist.all_reduce(g)\n        g /= 2\n",
     "still counts the dead rank 1"),
    ("nothing exchanged", "    for g in model_grads:\n        g /= 1\n", "nothing was exchanged"),
    ("not in place", "    out = []\n    for g in model_grads:\n        g = g.clone()\n"
                     "        dist.all_reduce(g, group=group)\n        out.append(g / dist.get_world_size(group))\n"
                     "    return out\n", "were not changed"),
]


@pytest.mark.parametrize("label, body, words", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_survivor_average_names_each_typical_mistake(label, body, words):
    verdict = check_survivor_average(survivor(body), stall_timeout=STALL)
    assert not verdict.passed, (label, verdict)
    assert words in verdict, (label, verdict)


def test_survivor_average_stops_a_loop_that_never_ends():
    verdict = check_survivor_average(survivor("    while True:\n        pass\n"), stall_timeout=STALL)
    assert not verdict.passed and "loop that never ends" in verdict, verdict


def test_a_stub_starts_no_rank(monkeypatch):
    import dpviz.engine.launch

    monkeypatch.setattr(dpviz.engine.launch, "launch", lambda *a, **k: pytest.fail("a stub must not start ranks"))
    stub = survivor('    """doc"""\n    raise NotImplementedError  # your code here\n')
    assert "not attempted yet" in check_survivor_average(stub)


def test_the_dead_rank_is_not_a_prefix_of_the_old_ranks():
    # with rank 1 dead, the survivors are 0 and 2: a group that is not "the first k - 1 ranks"
    assert failures.K == 3 and failures.DEAD == 1
