"""A chapter's kernel never imports torch: torch lives in the fork server and the ranks (issue 21: memory).

Importing torch costs a process about 220 MB, most of an open chapter's budget of 350 MB. A chapter imports
a topic's ``run_<kind>`` module for its config and its ``record_*`` function; those fronts check the config in
the kernel, launch a rank-side worker (the topic's ``rank_<kind>``) and assemble the record with numpy. These tests
import every public name a chapter uses, run real records, in a fresh interpreter, and look at ``sys.modules``.
"""

import subprocess
import sys
import textwrap

PUBLIC = """
import sys
import dpviz.cli
import dpviz.engine.forkserver
dpviz.engine.forkserver.warm_up()
from dpviz.topics.ground_floor.run_training import TrainConfig, record_run
from dpviz.topics.waiting.run_straggler import StragglerConfig, record_straggler
from dpviz.topics.splitting.run_pipeline import PipelineConfig, record_pipelines
from dpviz.topics.waiting.run_overlap import OverlapConfig
from dpviz.topics.waiting.run_async_sgd import AsyncConfig
from dpviz.topics.accumulation.run_accumulation import AccumConfig, record_accumulation
from dpviz.topics.measuring.run_bench import BenchConfig, log_sizes, run_sweep
from dpviz.topics.ground_floor.run_probing import probe_every_knob
from dpviz.topics.all_reduce.run_schedule import record_schedules
from dpviz.topics.bigger_batch.run_lr_sweep import record_lr_grid
from dpviz.topics.whole_picture.run_batchnorm import record_batchnorm
from dpviz.topics.splitting.run_tensor_parallel import record_tensor_split
from dpviz.topics.splitting.run_zero import record_zero
from dpviz.topics.waiting.run_figures import record_live
import dpviz.recipes
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
        from dpviz.topics.ground_floor.run_training import batch_indices, mse, TrainConfig
        from dpviz.topics.splitting.run_pipeline import pipeline_worker, make_model, split_model, stage_layers
        from dpviz.topics.measuring.run_bench import PLACEMENTS, wakeup_worker
        from dpviz.topics.waiting.run_overlap import make_buckets
        import torch
        rows = batch_indices(TrainConfig(k=2, b=4), 0)
        print(len(rows), float(mse(torch.ones(2), torch.zeros(2))), stage_layers(3, 2), PLACEMENTS[0])
    """)
    assert out.strip() == "8 1.0 [2, 1] as scheduled", out
