"""A Timeline drawn: one SVG (lanes of step bars, marks, waits for a human, cost and context
fill over time) and the self-contained HTML page around it (the SVG inline, the verdicts and
the steps as tables).

Server-side SVG written here, not a chart library: the drawing is rectangles, ticks and two
step lines, and a page that must load nothing from the network could not fetch a JS library
anyway (docs/decisions.md, "The report"). Every text that came from the run is box-writable
input, so each goes through `_esc` (the five XML specials escaped, the characters XML 1.0
forbids and lone surrogates dropped) and the page carries a Content-Security-Policy that
forbids every script and every load: an escape that failed would still run nothing.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Iterable

from flower.core.timeline import Bar, Timeline, Wait

WIDTH = 1200
LEFT = 190  # room for lane names
RIGHT = 30
LANE = 26
TOP = 76  # below the title lines and the key
CHART = 110  # height of each of the two line charts
PLOT = WIDTH - LEFT - RIGHT
# Colours by outcome (Bar.outcome): the tests read them back from a screenshot.
COLOURS = {
    "ok": "#2e7d32",
    "achieved": "#2e7d32",
    "failed": "#c62828",
    "unreachable": "#c62828",
    "not_yet": "#f9a825",
    "unfinished": "#1565c0",
}
MARK_COLOURS = {
    "fault": "#c62828",
    "retry": "#ef6c00",
    "handoff": "#6a1b9a",
    "reset": "#546e7a",
    "message": "#00838f",
}
WAIT_COLOUR = "#ffca28"
COST_COLOUR = "#1565c0"
CONTEXT_COLOUR = "#6a1b9a"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _esc(text: object) -> str:
    """`text` safe inside an XML or HTML text node or a quoted attribute."""
    return html.escape(_FORBIDDEN.sub("", str(text)), quote=True)


def svg(timeline: Timeline) -> str:
    """The picture as a standalone SVG document (also inlined in the page)."""
    t0, t1 = timeline.start, timeline.end
    span = max(t1 - t0, 1.0)

    def x(t: float) -> float:
        return LEFT + (min(max(t, t0), t1) - t0) / span * PLOT

    lanes = _lanes(timeline)
    rows = [*lanes, "human", "events"]
    lanes_bottom = TOP + LANE * len(rows)
    cost_top = lanes_bottom + 40
    context_top = cost_top + CHART + 40
    height = size(timeline)[1]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="12" y="24" font-size="16" font-weight="bold">{_esc(_title(timeline))}</text>',
        f'<text x="12" y="44" fill="#555">{_esc(_subtitle(timeline))}</text>',
    ]
    parts += _legend()
    for index, name in enumerate(rows):
        y = TOP + index * LANE
        fill = "#f5f5f5" if index % 2 == 0 else "#ffffff"
        parts.append(f'<rect x="0" y="{y}" width="{WIDTH}" height="{LANE}" fill="{fill}"/>')
        parts.append(f'<text x="12" y="{y + 17}">{_esc(_cut(name, 26))}</text>')
    for bar in timeline.bars:
        y = TOP + lanes.index(bar.lane) * LANE + 4
        parts.append(_bar(bar, x(bar.start), max(x(bar.end) - x(bar.start), 3.0), y))
    human_y = TOP + len(lanes) * LANE + 4
    parts += [_wait(wait, x(wait.start), x(wait.end or t1), human_y) for wait in timeline.waits]
    marks_y = TOP + (len(lanes) + 1) * LANE
    for mark in timeline.marks:
        mx = x(mark.t)
        colour = MARK_COLOURS.get(mark.kind, "#000000")
        parts.append(
            f'<path class="mark {_esc(mark.kind)}" d="M{mx - 5:.1f},{marks_y + 5} '
            f'L{mx + 5:.1f},{marks_y + 5} L{mx:.1f},{marks_y + 20} Z" fill="{colour}">'
            f"<title>{_esc(mark.kind)} · {_esc(_clock(mark.t))} · {_esc(mark.text)}</title></path>"
        )
    parts += _axis(span, lanes_bottom)
    cost = [(x(t), usd) for t, usd in timeline.cost]
    parts += _chart(cost, cost_top, "cost (USD)", COST_COLOUR, lambda v: f"${v:.4f}")
    if timeline.window:
        level = [(x(t), min(100.0, n / timeline.window * 100)) for t, n in timeline.context]
        name = f"context (% of {timeline.window:,} tokens)"
        parts += _chart(level, context_top, name, CONTEXT_COLOUR, _percent, peak=100.0)
    else:
        tokens = [(x(t), float(n)) for t, n in timeline.context]
        parts += _chart(tokens, context_top, "context (tokens)", CONTEXT_COLOUR, _tokens)
    parts.append("</svg>")
    return "\n".join(parts)


def size(timeline: Timeline) -> tuple[int, int]:
    """The SVG's width and height in pixels (a screenshot of it is taken at this size)."""
    return WIDTH, TOP + LANE * (len(_lanes(timeline)) + 2) + 3 * 40 + 2 * CHART


def _lanes(timeline: Timeline) -> list[str]:
    return list(dict.fromkeys(bar.lane for bar in timeline.bars))


def page(timeline: Timeline) -> str:
    """The report as one HTML page that loads nothing: the SVG inline, then the tables."""
    title = _esc(_title(timeline))
    verdicts = [[bar.label, bar.verdict, bar.reason, _clock(bar.end)] for bar in timeline.verdicts]
    steps = [
        [
            bar.label,
            bar.outcome,
            _clock(bar.start),
            _duration(bar.end - bar.start),
            str(bar.attempts),
            f"${bar.cost_usd:.4f}",
            f"{bar.context:,}",
            bar.error,
        ]
        for bar in timeline.bars
    ]
    waits = [
        [w.id, w.outcome, _clock(w.start), _duration((w.end or time.time()) - w.start), w.question]
        for w in timeline.waits
    ]
    marks = [[_clock(m.t), m.kind, m.text] for m in timeline.marks]
    sections = [
        _table("Verdicts", ["step", "verdict", "reason", "at"], verdicts),
        _table(
            "Steps",
            ["step", "outcome", "start", "took", "attempts", "cost", "context", "error"],
            steps,
        ),
        _table("Waits for a human", ["id", "outcome", "asked", "waited", "question"], waits),
        _table("Faults, retries, handoffs", ["at", "kind", "what"], marks),
    ]
    if timeline.problems:
        sections.append(_table("Not read", ["problem"], [[p] for p in timeline.problems]))
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            f"<title>{title}</title>",
            "<style>body{font-family:sans-serif;margin:24px;color:#222}"
            "table{border-collapse:collapse;margin:8px 0 24px}"
            "td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;"
            "max-width:560px;overflow-wrap:anywhere}th{background:#f5f5f5}</style>",
            "</head><body>",
            f'<h1 id="title">{title}</h1>',
            f'<div id="timeline">{svg(timeline)}</div>',
            *sections,
            "</body></html>",
        ]
    )


def _legend() -> list[str]:
    """The colours' key, under the title."""
    keys = [
        ("ok / achieved", COLOURS["ok"]),
        ("not yet", COLOURS["not_yet"]),
        ("failed", COLOURS["failed"]),
        ("unfinished", COLOURS["unfinished"]),
        ("waiting for you", WAIT_COLOUR),
        *((f"▼ {kind}", colour) for kind, colour in MARK_COLOURS.items()),
    ]
    parts, x = [], 12.0
    for name, colour in keys:
        parts.append(f'<rect x="{x:.0f}" y="53" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14:.0f}" y="62" font-size="11">{_esc(name)}</text>')
        x += 7.0 * len(name) + 34
    return parts


def framed(timeline: Timeline) -> str:
    """The SVG alone on a page with the same policy: what `--png` photographs."""
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        "<style>body{margin:0}</style></head><body>"
        f"{svg(timeline)}</body></html>"
    )


def _bar(bar: Bar, x: float, width: float, y: float) -> str:
    colour = COLOURS.get(bar.outcome, "#757575")
    tip = f"{bar.label} · {bar.outcome} · {_duration(bar.end - bar.start)} · ${bar.cost_usd:.4f}"
    if bar.error:
        tip += f" · {bar.error}"
    if bar.reason:
        tip += f" · {bar.reason}"
    return (
        f'<rect class="bar {_esc(bar.outcome)}" x="{x:.1f}" y="{y}" width="{width:.1f}" '
        f'height="{LANE - 8}" rx="3" fill="{colour}"><title>{_esc(tip)}</title></rect>'
    )


def _wait(wait: Wait, x0: float, x1: float, y: float) -> str:
    tip = f"{wait.id} · {wait.outcome} · {wait.question}"
    return (
        f'<rect class="wait" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 3.0):.1f}" '
        f'height="{LANE - 8}" fill="{WAIT_COLOUR}"><title>{_esc(tip)}</title></rect>'
    )


def _axis(span: float, y: float) -> list[str]:
    """Ticks of elapsed time under the lanes."""
    parts = [f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + PLOT}" y2="{y}" stroke="#999"/>']
    for i in range(6):
        tx = LEFT + PLOT * i / 5
        parts.append(f'<line x1="{tx:.1f}" y1="{y}" x2="{tx:.1f}" y2="{y + 5}" stroke="#999"/>')
        label = _duration(span * i / 5, fine=span < 10)
        parts.append(f'<text x="{tx:.1f}" y="{y + 18}" text-anchor="middle">{label}</text>')
    return parts


def _chart(
    points: list[tuple[float, float]],
    y0: float,
    name: str,
    colour: str,
    label: Callable[[float], str],
    *,
    peak: float | None = None,
) -> list[str]:
    """A step line of `points` (x in pixels, a value) in a box CHART high under `y0`, its
    scale up to `peak` (default: the highest value)."""
    peak = peak or max((v for _, v in points), default=0.0) or 1.0
    bottom = y0 + CHART
    parts = [
        f'<text x="{LEFT}" y="{y0 - 8}">{_esc(name)}</text>',
        f'<rect x="{LEFT}" y="{y0}" width="{PLOT}" height="{CHART}" fill="none" stroke="#ccc"/>',
        f'<text x="{LEFT - 6}" y="{y0 + 10}" text-anchor="end">{_esc(label(peak))}</text>',
        f'<text x="{LEFT - 6}" y="{bottom}" text-anchor="end">{_esc(label(0.0))}</text>',
    ]
    if points:
        path = []
        last_y = bottom
        for px, value in points:
            py = bottom - min(value / peak, 1.0) * CHART
            path.append(f"{px:.1f},{last_y:.1f} {px:.1f},{py:.1f}")
            last_y = py
        path.append(f"{LEFT + PLOT},{last_y:.1f}")
        parts.append(
            f'<polyline class="series" points="{" ".join(path)}" fill="none" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
    return parts


def _percent(value: float) -> str:
    return f"{value:.0f}%"


def _tokens(value: float) -> str:
    return f"{value:,.0f}"


def _table(heading: str, columns: list[str], rows: Iterable[list[str]]) -> str:
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    head = "".join(f"<th>{_esc(column)}</th>" for column in columns)
    return f"<h2>{_esc(heading)}</h2><table><tr>{head}</tr>{body or _none(len(columns))}</table>"


def _none(columns: int) -> str:
    return f'<tr><td colspan="{columns}">none</td></tr>'


def _title(timeline: Timeline) -> str:
    name = timeline.workspace.rstrip("/").rsplit("/", 1)[-1] or timeline.workspace
    return f"flower run · {name} · {timeline.status} · ${timeline.total_cost:.4f}"


def _subtitle(timeline: Timeline) -> str:
    runs = ", ".join(timeline.runs[-3:]) + (" …" if len(timeline.runs) > 3 else "")
    took = _duration(timeline.end - timeline.start)
    return f"{timeline.workspace} · started {_clock(timeline.start)} · {took} · runs {runs}"


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t > 0 else "-"


def _duration(seconds: float, *, fine: bool = False) -> str:
    if fine:
        return f"{max(0.0, seconds):.1f}s"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
