"""A chapter's kernel never imports torch: torch lives in the fork server and the ranks (issue 21: memory).

Importing torch costs a process about 220 MB, most of an open chapter's budget of 350 MB. A chapter imports
``dpviz.runs.<module>`` for its config and its ``record_*`` function; those fronts check the config in the
kernel, launch a rank-side worker (``dpviz.runs.ranks``) and assemble the record with numpy. These tests
import every public name a chapter uses, run real records, in a fresh interpreter, and look at ``sys.modules``.
"""

import subprocess
import sys
import textwrap

PUBLIC = """
import sys
import dpviz.cli
import dpviz.runs
dpviz.runs.warm_up()
from dpviz.runs.training import TrainConfig, record_run
from dpviz.runs.straggler import StragglerConfig, record_straggler
from dpviz.runs.pipeline import PipelineConfig, record_pipelines
from dpviz.runs.overlap import OverlapConfig
from dpviz.runs.async_sgd import AsyncConfig
from dpviz.runs.accumulation import AccumConfig, record_accumulation
from dpviz.runs.bench import BenchConfig, log_sizes, run_sweep
from dpviz.runs.probing import probe_every_knob
from dpviz.runs.schedule import record_schedules
from dpviz.runs.lr_sweep import record_lr_grid
from dpviz.runs.batchnorm import record_batchnorm
from dpviz.runs.tensor_parallel import record_tensor_split
from dpviz.runs.zero import record_zero
from dpviz.runs.waiting import record_live
import dpviz.runs.recipes
"""


def run_fresh(code: str, *, after_public: bool = True, timeout: float = 240) -> str:
    """Run ``code`` in a fresh interpreter (after importing every public name, by default); return its stdout,
    failing the test with its stderr if it fails."""
    code = (PUBLIC if after_public else "") + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_importing_every_public_run_name_leaves_torch_unloaded():
    out = run_fresh("print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    assert out.strip() == "[]", f"the caller imported torch: {out.strip()[:300]}"


def test_configs_are_still_checked_in_the_caller_before_any_rank_starts():
    out = run_fresh("""
        for make in (lambda: TrainConfig(k=0), lambda: StragglerConfig(k=0), lambda: record_zero(k=0),
                     lambda: record_run(k=2, b=3, global_batch=7)):
            try:
                make()
            except ValueError as e:
                print(str(e).count("."), "torch" in sys.modules)
    """)
    lines = out.splitlines()
    assert len(lines) == 4 and all(line.endswith("False") for line in lines), out


def test_real_records_leave_torch_unloaded_in_the_caller():
    out = run_fresh("""
        run = record_run(k=2, b=4, steps=3)
        print(run.check())
        split = record_tensor_split(k=2)
        print(split.check())
        zero = record_zero(k=2, steps=2)
        print(zero.check())
        print("torch loaded:", "torch" in sys.modules)
    """)
    assert "replicas held bit-identical parameters" in out and "big-batch gradient" in out, out
    assert out.strip().endswith("torch loaded: False"), out


def test_old_import_paths_of_rank_side_helpers_still_work():
    out = run_fresh(after_public=False, code="""
        from dpviz.runs.training import batch_indices, mse, TrainConfig
        from dpviz.runs.pipeline import pipeline_worker, make_model, split_model, stage_layers
        from dpviz.runs.bench import PLACEMENTS, wakeup_worker
        from dpviz.runs.overlap import make_buckets
        import torch
        rows = batch_indices(TrainConfig(k=2, b=4), 0)
        print(len(rows), float(mse(torch.ones(2), torch.zeros(2))), stage_layers(3, 2), PLACEMENTS[0])
    """)
    assert out.strip() == "8 1.0 [2, 1] as scheduled", out
