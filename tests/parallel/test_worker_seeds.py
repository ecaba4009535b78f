"""Issue 35 item 8: after ``random.seed``, ``np.random.seed`` and ``torch.manual_seed``
(or ``Options.seed``), a process map's workers seed their global generators alike in
every run, from the pipeline's seed and the worker's index (torch's DataLoader:
``base_seed + worker_id``); on main they drew ``secrets.randbits`` per worker, so two runs
of one seeded script differed (while ``DataLoader(num_workers=1)`` repeated its draws)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import datapipe as dp

ROOT = str(Path(dp.__file__).resolve().parents[1])  # the datapipe under test

SCRIPT = textwrap.dedent(
    """
    import random
    import numpy as np
    import torch
    import datapipe as dp

    def draw(x):
        import os, random
        import numpy as np, torch
        return np.array([x, os.getpid(), random.randrange(2**30), np.random.randint(2**30),
                         int(torch.randint(2**30, ()))], dtype=np.int64)

    def first_draws(ds):
        # Each worker's first draws (of the lowest element it computed): which elements a
        # worker gets varies with timing, the stream each worker draws from does not.
        first = {}
        for x, pid, *d in sorted(r.tolist() for r in ds):
            first.setdefault(pid, d)
        return sorted(first.values())

    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    ds = dp.Dataset.range(64).map(draw, num_parallel_calls=2, executor="process")
    print([first_draws(ds), first_draws(ds.with_options(dp.Options(seed=11))),
           first_draws(ds.with_options(dp.Options(seed=12)))])
    """
)


def run_once() -> list:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return ast.literal_eval(done.stdout.strip())


def test_seeded_runs_seed_their_worker_processes_alike():
    first, second = run_once(), run_once()
    assert first == second  # main: every worker's draws differed run to run
    for pool in first:  # global seeds, Options(seed=11), Options(seed=12)
        assert len(pool) == 2 and pool[0] != pool[1]  # two workers, two streams
        assert all(0 <= v < 2**30 for v in pool[0] + pool[1])
    assert first[1] != first[2] and first[0] != first[1]  # the pipeline's seed decides
