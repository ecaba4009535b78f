"""Multi-worker profiles: each rank writes its own report and trace; one view merges them.

A job's step time is set by its slowest rank, so the merged view puts, for each stage, the
ranks side by side and names the one that spent the most work per element there.

Each rank calls ``profile_rank(ds, directory)`` (or ``save_report``), which writes
``report-rank{r}.json`` and ``trace-rank{r}.json``; then any process calls
``merge_reports(directory)`` (or passes the reports, dicts or paths).
"""

from __future__ import annotations

import glob
import json
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from datapipe.stats.report import ProfileReport


def current_rank() -> int:
    """This process's rank: ``datapipe.distribute``'s worker context (torch.distributed,
    then the launcher's ``RANK``), else the ``RANK`` environment variable, else 0."""
    try:
        from datapipe.distribute.context import resolve_process

        return int(resolve_process()[0])
    except Exception:  # noqa: BLE001 - a malformed context must not break a profile
        raw = os.environ.get("RANK", "0")
        return int(raw) if raw.strip().isdigit() else 0


def rank_paths(directory: str | os.PathLike, rank: int | None = None) -> tuple[str, str]:
    """``(report path, trace path)`` of ``rank`` (default: this process's) in ``directory``."""
    r = current_rank() if rank is None else int(rank)
    d = os.fspath(directory)
    return os.path.join(d, f"report-rank{r}.json"), os.path.join(d, f"trace-rank{r}.json")


def save_report(report: ProfileReport, directory: str | os.PathLike) -> str:
    """Write ``report`` as ``report-rank{report.rank}.json`` in ``directory``; its path."""
    os.makedirs(directory, exist_ok=True)
    path = rank_paths(directory, report.rank)[0]
    report.to_json(path)
    return path


def profile_rank(ds: Any, directory: str | os.PathLike, **kwargs: Any) -> ProfileReport:
    """Profile ``ds`` on this rank, writing ``report-rank{r}.json`` and ``trace-rank{r}.json``
    into ``directory``; ``kwargs`` go to ``datapipe.stats.profile``."""
    from datapipe.stats.profile import profile

    os.makedirs(directory, exist_ok=True)
    rank = kwargs.pop("rank", None)
    rank = current_rank() if rank is None else int(rank)
    report_path, trace_path = rank_paths(directory, rank)
    report = profile(ds, trace_path=trace_path, rank=rank, **kwargs)
    report.to_json(report_path)
    return report


@dataclass
class MergedStage:
    """One stage across ranks. ``per_rank[r]`` holds that rank's elements, rate,
    busy_share and ``cost_us`` (busy µs per element per thread); ``slowest_rank`` has the
    highest cost; ``spread`` is its cost over the median cost (1.0 = balanced)."""

    label: str
    per_rank: dict[int, dict]
    slowest_rank: int
    spread: float


@dataclass
class MergedReport:
    """Reports of several ranks in one view.

    Attributes:
        ranks: the ranks merged; rates: elements/s each rank's consumer received;
        slowest_rank: the rank with the lowest rate; stages: one ``MergedStage`` per stage;
        verdicts: each rank's verdict as text.
    """

    ranks: list[int]
    rates: dict[int, float]
    slowest_rank: int
    stages: list[MergedStage]
    verdicts: dict[int, str]

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))

    def __str__(self) -> str:
        lines = [
            f"datapipe profile of {len(self.ranks)} ranks; slowest rank: {self.slowest_rank} "
            f"({self.rates[self.slowest_rank]:.1f} elements/s)",
            "",
        ]
        head = ["stage", *[f"rank {r} µs/el" for r in self.ranks], "slowest", "spread"]
        rows = [head]
        for s in self.stages:
            costs = [
                f"{s.per_rank[r]['cost_us']:.2f}" if r in s.per_rank else "-" for r in self.ranks
            ]
            rows.append([s.label, *costs, str(s.slowest_rank), f"{s.spread:.2f}x"])
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        for row in rows:
            lines.append(
                "  ".join(
                    [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
                )
            )
        partial = [s for s in self.stages if len(s.per_rank) < len(self.ranks)]
        if partial:
            lines.append(
                "stages not on every rank: "
                + ", ".join(f"{s.label} (only ranks {sorted(s.per_rank)})" for s in partial)
                + "; those ranks run a different pipeline"
            )
        lines.append("")
        lines += [f"rank {r}: {v}" for r, v in sorted(self.verdicts.items())]
        return "\n".join(lines)


def _load(x: Any) -> dict:
    if isinstance(x, ProfileReport):
        return x.to_dict()
    if isinstance(x, dict):
        return x
    with open(x, encoding="utf-8") as f:
        return json.load(f)


def _expand(reports: Any) -> list:
    if isinstance(reports, (str, os.PathLike)) and os.path.isdir(reports):
        paths = sorted(glob.glob(os.path.join(os.fspath(reports), "report-rank*.json")))
        if not paths:
            raise ValueError(f"merge_reports: no report-rank*.json in {os.fspath(reports)!r}")
        return paths
    return list(reports)


def merge_reports(reports: Any) -> MergedReport:
    """Merge per-rank reports (``ProfileReport``s, their ``to_dict()``s, JSON paths, or a
    directory of ``report-rank*.json``) into one view with the slowest rank per stage.

    Stages are matched by label. A stage that only some ranks run (their pipelines differ)
    is listed after its predecessor, compared among the ranks that have it, and named in
    the text form.

    Raises:
        ValueError: no reports, or two reports with the same rank.

    Example:
        >>> import datapipe as dp
        >>> a = dp.range(100).batch(10).profile(rank=0)
        >>> b = dp.range(100).batch(10).profile(rank=1)
        >>> merge_reports([a, b]).ranks
        [0, 1]
    """
    dicts = [_load(x) for x in _expand(reports)]
    if not dicts:
        raise ValueError("merge_reports: no reports given")
    ranks = [int(d["rank"]) for d in dicts]
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"merge_reports: duplicate ranks {sorted(ranks)}; each rank once")
    rates = {int(d["rank"]): float(d["rate"]) for d in dicts}
    labels: list[str] = []
    per_stage: dict[str, dict[int, dict]] = {}
    for d in dicts:
        prev = -1  # a stage only some ranks run goes after its predecessor in their list
        for s in d["stages"]:
            if s["label"] not in per_stage:
                labels.insert(prev + 1, s["label"])
                per_stage[s["label"]] = {}
            prev = labels.index(s["label"])
            par = max(int(s.get("parallelism") or 1), 1)
            cost = s["busy_s"] / par / s["elements"] * 1e6 if s["elements"] else 0.0
            per_stage[s["label"]][int(d["rank"])] = {
                "elements": s["elements"],
                "rate": s["rate"],
                "busy_share": s["busy_share"],
                "cost_us": cost,
            }
    stages = []
    for label in labels:
        pr = per_stage[label]
        slowest = max(sorted(pr), key=lambda r: pr[r]["cost_us"])
        median = statistics.median(v["cost_us"] for v in pr.values())
        spread = pr[slowest]["cost_us"] / median if median > 0 else 1.0
        stages.append(MergedStage(label, pr, slowest, spread))
    return MergedReport(
        ranks=sorted(ranks),
        rates=rates,
        slowest_rank=min(sorted(rates), key=lambda r: rates[r]),
        stages=stages,
        verdicts={int(d["rank"]): _verdict_text(d["verdict"]) for d in dicts},
    )


def _verdict_text(v: dict) -> str:
    where = f"bottleneck: {v['stage']}. " if v.get("stage") else ""
    return f"{where}{v['reason']} Fix: {v['fix']}"
