"""The history sections of the HTML report (trend, regressions, flaky cases, fuzz bugs),
from the report-data.json that `stomp-conformance pipeline` writes. `run --history PATH`
adds them to a run's page; the pipeline writes them alone as report.html beside the data.

The file is checked against history.schema.json before use. Every string in it came from
a broker or a record (builds, case ids, replay commands) and reaches the page through the
same autoescaping as the rest of the report."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from conformance.files import package_schema, read_checked

FILE = "report-data.json"
#: The history sections alone, as a page, beside FILE.
PAGE = "report.html"
SCHEMA_VERSION = 1
#: The trend chart's drawing area, in SVG user units.
WIDTH, HEIGHT = 640, 120
#: Runs per broker listed under its chart, newest first (the chart shows them all).
RECENT = 8


def schema() -> dict[str, Any]:
    return package_schema("conformance.report", "history.schema.json")


def load_history(path: Path | str) -> dict[str, Any]:
    """report-data.json, named or as the pipeline output folder holding it."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE
    return read_checked(path, schema(), f"the {FILE} of `stomp-conformance pipeline`")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _chart(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The pass rate of each run as SVG coordinates: oldest left, 100% at the top (a run
    where no case was decided has no dot)."""
    step = WIDTH / max(len(points) - 1, 1)
    dots = [{"x": f"{i * step:.1f}", "y": f"{HEIGHT * (1 - p['pass_rate']):.1f}",
             "failing": bool(p["failed"] or p["error"]),
             "title": f"{p['timestamp']} run {p['run_id']}: {_rate(p['pass_rate'])} passed, "
                      f"{p['failed']} failed, {p['error']} error"}
            for i, p in enumerate(points) if p["pass_rate"] is not None]
    return {"line": " ".join(f"{d['x']},{d['y']}" for d in dots), "dots": dots}


def _day(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp


def history_view(data: dict[str, Any]) -> dict[str, Any]:
    """What the history template shows, from a loaded report-data.json."""
    trends = []
    for broker, points in sorted(data["trend"].items()):
        if not points:
            continue
        rates = [p["pass_rate"] for p in points if p["pass_rate"] is not None]
        trends.append({
            "broker": broker, "runs": len(points), "chart": _chart(points),
            "latest": _rate(rates[-1] if rates else None),
            "change": f"{100 * (rates[-1] - rates[0]):+.1f} points" if rates else "-",
            "recent": [dict(p, when=_day(p["timestamp"]), rate=_rate(p["pass_rate"]))
                       for p in reversed(points[-RECENT:])],
        })
    return {
        "generated": data["generated"], "inputs": data["inputs"], "trends": trends,
        "width": WIDTH, "height": HEIGHT,
        "regressions": [dict(r, when=_day(r["timestamp"])) for r in data["regressions"]],
        "flaky": [dict(f, rate=f"{f['flake_rate']:.0%}") for f in data["flaky"]],
        "buckets": data["buckets"],
    }
