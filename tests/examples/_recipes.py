"""What the Lightning and Accelerate recipe tests share: reading the ids each rank trained
on (the scripts' ``--record`` files) and running a page's commands as written."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def commands(page: pathlib.Path) -> list[str]:
    """The page's bash lines, in order."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page.read_text(), flags=re.M | re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def as_run_here(command: str) -> list[str]:
    """The page's command with this interpreter for ``.venv/bin/python`` (and the torchrun
    beside it, on a free port) and the repository's scripts by absolute path."""
    words = shlex.split(command)
    if words[0] == ".venv/bin/python":
        words[:1] = [sys.executable]
    elif words[0] == ".venv/bin/torchrun":  # other jobs may hold port 29500
        words[:1] = [str(pathlib.Path(sys.executable).with_name("torchrun")), "--standalone"]
    else:
        raise AssertionError(f"the page runs {words[0]!r}: teach this test about it")
    return [str(ROOT / w) if w.startswith("examples/") else w for w in words]


def run(command: str, cwd: pathlib.Path, timeout: float) -> str:
    """Run one of a page's commands in ``cwd``; its stdout (stderr in the failure)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(PYTHONPATH=path, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    done = subprocess.run(
        as_run_here(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout


def steps(record: pathlib.Path) -> dict[int, list[dict]]:
    """``{rank: [{"epoch", "step", "ids"}, ...]}`` from a ``--record`` folder."""
    out = {}
    for path in sorted(record.glob("rank*.jsonl")):
        rank = int(path.stem.removeprefix("rank"))
        out[rank] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def ids_per_epoch(stopped: pathlib.Path, resumed: pathlib.Path, checkpoint_step: int):
    """``{epoch: [ids trained on, all ranks]}`` of a run that stopped and its resume: the
    stopped run's steps before the checkpoint (the ones after it were lost with the job),
    then the resumed run's."""
    seen: dict[int, list[int]] = {}
    for record, keep in ((stopped, lambda s: s < checkpoint_step), (resumed, lambda s: True)):
        for lines in steps(record).values():
            for line in lines:
                if keep(line["step"]):
                    seen.setdefault(line["epoch"], []).extend(line["ids"])
    return seen


def check_exactly_once(stopped, resumed, n: int, ranks: int, checkpoint_step: int) -> None:
    """Across a stopped run and its resume (their ``--record`` folders): every id of
    ``range(n)`` exactly once per epoch, the resume starting at ``checkpoint_step`` on every
    rank with full batches of 32, and a new order in the second epoch."""
    per_epoch = ids_per_epoch(stopped, resumed, checkpoint_step)
    assert sorted(per_epoch) == [0, 1]
    for epoch, ids in per_epoch.items():
        assert len(ids) == len(set(ids)), f"epoch {epoch}: an image twice"
        assert sorted(ids) == list(range(n)), f"epoch {epoch}: {n - len(set(ids))} missing"
    run2 = steps(resumed)
    assert sorted(run2) == list(range(ranks))
    for lines in run2.values():  # the resumed run starts at the checkpoint's step
        assert [line["step"] for line in lines][0] == checkpoint_step
        assert all(len(line["ids"]) == 32 for line in lines)
    # a new order in the second epoch (global_shuffle reshuffles each epoch)
    rank0 = steps(stopped)[0]
    firsts = [next(line["ids"] for line in rank0 if line["epoch"] == e) for e in (0, 1)]
    assert firsts[0] != firsts[1]
