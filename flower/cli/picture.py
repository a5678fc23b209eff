"""A Timeline drawn: one SVG (lanes of step bars, marks, waits for a human, cost and context
fill over time) and the self-contained HTML page around it (the SVG inline, the verdicts and
the steps as tables).

It speaks the run's language (flower.core.lang: `--lang`, $FLOWER_LANG): headings, columns,
keys and outcomes from the `report.*` texts, and each step as the live UI names it
(flower.core.labels.display_name), the seeds' recorded name beside it where that differs
(`work (干活)`). Under each step's lane, a lane of its tool calls (flower.core.toolcalls):
a tick per call, as wide as it took, coloured by its outcome, its name, duration and outcome
on hover.

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

from flower.core.labels import display_name
from flower.core.lang import current, text
from flower.core.timeline import Bar, Timeline, Wait
from flower.core.toolcalls import ToolCall

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
TOOL_COLOURS = {
    "ok": "#43a047",
    "error": "#c62828",
    "denied": "#ef6c00",
    "open": "#9e9e9e",
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

    rows = _rows(timeline)
    where = {row: index for index, row in enumerate(rows)}
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
    for index, (kind, lane) in enumerate(rows):
        y = TOP + index * LANE
        fill = "#f5f5f5" if index % 2 == 0 else "#ffffff"
        name = _row_name(kind, lane)
        parts.append(f'<rect x="0" y="{y}" width="{WIDTH}" height="{LANE}" fill="{fill}"/>')
        parts.append(f'<text x="12" y="{y + 17}">{_esc(_cut(name, 28))}</text>')
    for bar in timeline.bars:
        y = TOP + where["lane", bar.lane] * LANE + 4
        parts.append(_bar(bar, x(bar.start), max(x(bar.end) - x(bar.start), 3.0), y))
    for call in timeline.tools:
        y = TOP + where["tools", call.lane] * LANE + 7
        parts.append(_tick(call, x(call.start), x(call.end or call.start), y))
    human_y = TOP + where["human", ""] * LANE + 4
    parts += [_wait(wait, x(wait.start), x(wait.end or t1), human_y) for wait in timeline.waits]
    marks_y = TOP + where["events", ""] * LANE
    for mark in timeline.marks:
        mx = x(mark.t)
        colour = MARK_COLOURS.get(mark.kind, "#000000")
        tip = f"{_word('mark', mark.kind)} · {_clock(mark.t)} · {mark.text}"
        parts.append(
            f'<path class="mark {_esc(mark.kind)}" d="M{mx - 5:.1f},{marks_y + 5} '
            f'L{mx + 5:.1f},{marks_y + 5} L{mx:.1f},{marks_y + 20} Z" fill="{colour}">'
            f"<title>{_esc(tip)}</title></path>"
        )
    parts += _axis(span, lanes_bottom)
    cost = [(x(t), usd) for t, usd in timeline.cost]
    parts += _chart(cost, cost_top, text("report.chart.cost"), COST_COLOUR, lambda v: f"${v:.4f}")
    if timeline.window:
        level = [(x(t), min(100.0, n / timeline.window * 100)) for t, n in timeline.context]
        name = text("report.chart.context_share", window=f"{timeline.window:,}")
        parts += _chart(level, context_top, name, CONTEXT_COLOUR, _percent, peak=100.0)
    else:
        tokens = [(x(t), float(n)) for t, n in timeline.context]
        name = text("report.chart.context")
        parts += _chart(tokens, context_top, name, CONTEXT_COLOUR, _tokens)
    parts.append("</svg>")
    return "\n".join(parts)


def size(timeline: Timeline) -> tuple[int, int]:
    """The SVG's width and height in pixels (a screenshot of it is taken at this size)."""
    return WIDTH, TOP + LANE * len(_rows(timeline)) + 3 * 40 + 2 * CHART


def _rows(timeline: Timeline) -> list[tuple[str, str]]:
    """The picture's rows, top down: each step's lane, with the lane of its tool calls
    under it when it made any; then the human's and the events'."""
    called = {call.lane for call in timeline.tools}
    rows = []
    for lane in dict.fromkeys(bar.lane for bar in timeline.bars):
        rows.append(("lane", lane))
        if lane in called:
            rows.append(("tools", lane))
    return [*rows, ("human", ""), ("events", "")]


def _row_name(kind: str, lane: str) -> str:
    if kind == "lane":
        return named(lane)
    if kind == "tools":
        return text("report.lane.tools")
    return text(f"report.lane.{kind}")


def named(label: str) -> str:
    """A recorded step label as the live UI shows it, the recorded one beside it where the
    two differ: `work#round2 (干活#round2)` in en, `干活#round2` in zh."""
    shown = display_name(label)
    return label if shown == label else f"{shown} ({label})"


def _word(group: str, word: str) -> str:
    """An outcome or a mark's kind in the run's language (an unknown one as it is)."""
    try:
        return text(f"report.{group}.{word}")
    except KeyError:
        return word


def page(timeline: Timeline) -> str:
    """The report as one HTML page that loads nothing: the SVG inline, then the tables."""
    title = _esc(_title(timeline))
    verdicts = [
        [named(bar.label), _word("outcome", bar.verdict), bar.reason, _clock(bar.end)]
        for bar in timeline.verdicts
    ]
    steps = [
        [
            named(bar.label),
            _word("outcome", bar.outcome),
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
    marks = [[_clock(m.t), _word("mark", m.kind), m.text] for m in timeline.marks]
    sections = [
        _table("verdicts", ["step", "verdict", "reason", "at"], verdicts),
        _table(
            "steps",
            ["step", "outcome", "start", "took", "attempts", "cost", "context", "error"],
            steps,
        ),
        _table("tools", ["step", "calls", "tools", *TOOL_COLOURS, "took"], _tool_rows(timeline)),
        _table("waits", ["id", "outcome", "asked", "waited", "question"], waits),
        _table("marks", ["at", "kind", "what"], marks),
    ]
    if timeline.problems:
        sections.append(_table("problems", ["problem"], [[p] for p in timeline.problems]))
    return "\n".join(
        [
            "<!doctype html>",
            f'<html lang="{current()}"><head><meta charset="utf-8">',
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
        (text("report.key.done"), COLOURS["ok"]),
        *((_word("outcome", word), COLOURS[word]) for word in ("not_yet", "failed", "unfinished")),
        (text("report.key.waiting"), WAIT_COLOUR),
        *((f"▼ {_word('mark', kind)}", colour) for kind, colour in MARK_COLOURS.items()),
        (f"| {text('report.key.tool')}", TOOL_COLOURS["ok"]),
    ]
    parts, x = [], 12.0
    for name, colour in keys:
        parts.append(f'<rect x="{x:.0f}" y="53" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14:.0f}" y="62" font-size="11">{_esc(name)}</text>')
        x += 7.0 * sum(1 + (ord(c) > 0x2E7F) for c in name) + 34  # a CJK glyph is two wide
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
    took = _duration(bar.end - bar.start)
    tip = f"{named(bar.label)} · {_word('outcome', bar.outcome)} · {took} · ${bar.cost_usd:.4f}"
    if bar.error:
        tip += f" · {bar.error}"
    if bar.reason:
        tip += f" · {bar.reason}"
    return (
        f'<rect class="bar {_esc(bar.outcome)}" x="{x:.1f}" y="{y}" width="{width:.1f}" '
        f'height="{LANE - 8}" rx="3" fill="{colour}"><title>{_esc(tip)}</title></rect>'
    )


def _tick(call: ToolCall, x0: float, x1: float, y: float) -> str:
    """One tool call: as wide as it took (2 px at least), its name, duration and outcome on
    hover (and its input's summary, and `worker` for a subagent's)."""
    colour = TOOL_COLOURS.get(call.outcome, "#9e9e9e")
    took = "…" if call.end is None else _seconds(call.seconds)
    who = f" · {text('report.worker')}" if call.worker else ""
    tip = f"{call.name} · {took} · {_word('outcome', call.outcome)}{who} · {call.summary}"
    return (
        f'<rect class="tool {_esc(call.outcome)}" x="{x0:.1f}" y="{y}" '
        f'width="{max(x1 - x0, 2.0):.1f}" height="{LANE - 14}" fill="{colour}">'
        f"<title>{_esc(tip)}</title></rect>"
    )


def _tool_rows(timeline: Timeline) -> list[list[str]]:
    """Per step lane: its calls, the tools most called, the calls by outcome, their time."""
    rows = []
    for lane in dict.fromkeys(call.lane for call in timeline.tools):
        calls = [call for call in timeline.tools if call.lane == lane]
        names: dict[str, int] = {}
        for call in calls:
            names[call.name] = names.get(call.name, 0) + 1
        most = sorted(names.items(), key=lambda item: -item[1])[:6]
        by = [str(sum(call.outcome == outcome for call in calls)) for outcome in TOOL_COLOURS]
        took = _seconds(sum(call.seconds for call in calls))
        tools = ", ".join(f"{name} ({count})" for name, count in most)
        rows.append([named(lane), str(len(calls)), tools, *by, took])
    return rows


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
    """A table titled by `report.table.<heading>`, its columns `report.column.<name>` (or a
    tool call's outcome word); its id the heading's key."""
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    names = [
        _word("outcome", column) if column in TOOL_COLOURS else text(f"report.column.{column}")
        for column in columns
    ]
    head = "".join(f"<th>{_esc(name)}</th>" for name in names)
    title = _esc(text(f"report.table.{heading}"))
    empty = _none(len(columns))
    return f'<h2 id="{heading}">{title}</h2><table><tr>{head}</tr>{body or empty}</table>'


def _none(columns: int) -> str:
    return f'<tr><td colspan="{columns}">{_esc(text("report.table.none"))}</td></tr>'


def _title(timeline: Timeline) -> str:
    name = timeline.workspace.rstrip("/").rsplit("/", 1)[-1] or timeline.workspace
    status, cost = _word("outcome", timeline.status), f"${timeline.total_cost:.4f}"
    return text("report.title", workspace=name, status=status, cost=cost)


def _subtitle(timeline: Timeline) -> str:
    runs = ", ".join(timeline.runs[-3:]) + (" …" if len(timeline.runs) > 3 else "")
    took = _duration(timeline.end - timeline.start)
    start = _clock(timeline.start)
    return text("report.subtitle", workspace=timeline.workspace, start=start, took=took, runs=runs)


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t > 0 else "-"


def _seconds(seconds: float) -> str:
    """A tool call's time: tenths of a second under a minute."""
    return f"{seconds:.1f}s" if seconds < 60 else _duration(seconds)


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
