"""A ``distribute`` consumer's checkpoint: checking it, and the part the dispatcher needs.

Layout (``ServiceIterator.get_state``): ``job`` (``name``, ``uid``, ``epoch``, ``seed``,
``mode``, ``layout``: the job it read and how it was cut into splits), ``consumer`` (its
index, or None), ``done`` (the splits whose every element it delivered, including those it
adopted when it was itself resumed), ``records`` (its splits in progress: ``sid``,
``carry`` = elements received and not delivered as ``buffer_to_state`` writes them,
``state`` = the split chain's state after them, ``finished``). JSON-like, so
``save_state`` writes it.
"""

from __future__ import annotations

from typing import Any

from datapipe.service.layout import layout_from_state

STATE_KEYS = ("job", "consumer", "done", "records")
JOB_KEYS = ("name", "uid", "epoch", "seed", "mode", "layout")


def own_part(state: dict) -> dict:
    """The part of a consumer state the dispatcher needs to resume a job."""
    return {"consumer": state["consumer"], "done": list(state["done"]),
            "records": list(state["records"])}  # fmt: skip


def check_consumer_states(state: Any, node: Any) -> list[dict]:
    """``state`` as a list of consumer states of one job of ``node``'s kind.

    Raises:
        ValueError: not the dict ``get_state`` made (or a list of them), states of
            different jobs, or of another processing mode / number of consumers.
    """
    states = list(state) if isinstance(state, (list, tuple)) else [state]
    if not states:
        raise ValueError("distribute: set_state got an empty list of states")
    for j, s in enumerate(states):
        if not isinstance(s, dict) or any(k not in s for k in STATE_KEYS):
            raise ValueError(
                f"distribute: state {j} is not a distribute consumer's state (expected the "
                f"dict get_state() returned, with keys {list(STATE_KEYS)})"
            )
        job = s["job"]
        if not isinstance(job, dict) or any(k not in job for k in JOB_KEYS):
            raise ValueError(f"distribute: state {j} has a malformed 'job' entry")
    first = states[0]["job"]
    for s in states[1:]:
        if (s["job"]["name"], s["job"]["uid"], list(s["job"]["epoch"])) != (
            first["name"],
            first["uid"],
            list(first["epoch"]),
        ):
            raise ValueError("distribute: the states were saved by consumers of different jobs")
    if first["mode"] != node.processing_mode:
        raise ValueError(
            f"distribute: the state was saved in {first['mode']!r} mode, this pipeline runs "
            f"{node.processing_mode!r}"
        )
    saved = layout_from_state(first["layout"])
    if saved.consumers != node.num_consumers:
        raise ValueError(
            f"distribute: the state was saved with num_consumers={saved.consumers}, this "
            f"consumer has num_consumers={node.num_consumers}"
        )
    if first["name"] != node.job_name:
        raise ValueError(
            f"distribute: the state was saved by job_name={first['name']!r}, this pipeline "
            f"uses job_name={node.job_name!r}"
        )
    return states
