"""Small inline SVG charts for the HTML report: no plotting library, no scripts, no fonts.

Each function returns one ``<svg>`` element as a string. Every piece of text is escaped, sizes
are in the viewBox (the page scales them), and colours come from the report's CSS classes, so a
chart renders the same in any browser without network access.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH = 480
ROW = 26


def _svg(height: float, body: str, label: str) -> str:
    return (f'<svg class="chart" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
            f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
            f"<title>{escape(label)}</title>{body}</svg>")


def _empty(label: str, message: str) -> str:
    return _svg(60, f'<text class="muted" x="{WIDTH / 2}" y="34" text-anchor="middle">'
                    f"{escape(message)}</text>", label)


def hbars(items: Sequence[tuple[str, float, str]], *, label: str, empty: str = "nothing to show",
          max_value: float | None = None, classes: Sequence[str] | None = None) -> str:
    """Horizontal bars: ``(name, value, text shown after the bar)`` per row, largest scale
    ``max_value`` (default: the largest value)."""
    if not items:
        return _empty(label, empty)
    top = max_value if max_value is not None else max(v for _, v, _ in items)
    top = top or 1.0
    left, right = 150, 90
    span = WIDTH - left - right
    body = []
    for i, (name, value, text) in enumerate(items):
        y = 8 + i * ROW
        width = max(0.0, min(1.0, value / top)) * span
        cls = classes[i] if classes else "bar"
        body.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(_short(name, 22))}'
            f"<title>{escape(name)}</title></text>"
            f'<rect class="track" x="{left}" y="{y + 3}" width="{span}" height="16" rx="2"/>'
            f'<rect class="{cls}" x="{left}" y="{y + 3}" width="{width:.1f}" height="16" rx="2"/>'
            f'<text x="{left + span + 8}" y="{y + 15}">{escape(text)}</text>')
    return _svg(16 + len(items) * ROW, "".join(body), label)


def vbars(items: Sequence[tuple[str, float]], *, label: str, x_label: str = "", y_label: str = "",
          empty: str = "nothing to show") -> str:
    """Vertical bars of counts (a histogram), the count printed above each bar."""
    if not items:
        return _empty(label, empty)
    height, left, bottom, top_pad = 220, 44, 42, 18
    plot_h = height - bottom - top_pad
    span = WIDTH - left - 12
    top = max(v for _, v in items) or 1.0
    top = 4 * math.ceil(top / 4)  # whole-number ticks at quarters
    slot = span / len(items)
    bar_w = max(2.0, slot * 0.72)
    body = [_axes(left, top_pad, span, plot_h, top, y_label, integer=True)]
    for i, (name, value) in enumerate(items):
        h = value / top * plot_h
        x = left + i * slot + (slot - bar_w) / 2
        y = top_pad + plot_h - h
        body.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}">'
                    f"<title>{escape(name)}: {value:g}</title></rect>")
        if len(items) <= 20:
            body.append(f'<text class="small" x="{x + bar_w / 2:.1f}" y="{y - 4:.1f}" '
                        f'text-anchor="middle">{value:g}</text>')
        if len(items) <= 12 or i % max(1, len(items) // 6) == 0:
            body.append(f'<text class="small" x="{x + bar_w / 2:.1f}" y="{top_pad + plot_h + 16}" '
                        f'text-anchor="middle">{escape(_short(name, 12))}</text>')
    if x_label:
        body.append(f'<text class="muted" x="{left + span / 2}" y="{height - 6}" text-anchor="middle">'
                    f"{escape(x_label)}</text>")
    return _svg(height, "".join(body), label)


def line(points: Sequence[tuple[float, float]], *, label: str, x_label: str = "", y_label: str = "",
         y_max: float = 1.0, empty: str = "nothing to show", annotations: Sequence[str] = ()) -> str:
    """A line through ``(x, y)`` points with a dot at each, on a y axis from 0 to ``y_max``."""
    if not points:
        return _empty(label, empty)
    height, left, bottom, top_pad = 220, 44, 42, 18
    plot_h = height - bottom - top_pad
    span = WIDTH - left - 24
    xs = [x for x, _ in points]
    x0, x1 = min(xs), max(xs)

    pad = 22  # keep the first and last points off the axes

    def px(x: float) -> float:
        return left + pad + (span / 2 - pad if x1 == x0 else (x - x0) / (x1 - x0) * (span - 2 * pad))

    def py(y: float) -> float:
        return top_pad + plot_h - max(0.0, min(1.0, y / y_max)) * plot_h

    body = [_axes(left, top_pad, span, plot_h, y_max, y_label, integer=False)]
    path = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(points))
    body.append(f'<path class="line" d="{path}"/>')
    every = max(1, len(points) // 10)
    for i, (x, y) in enumerate(points):
        note = f" ({annotations[i]})" if i < len(annotations) and annotations[i] else ""
        body.append(f'<circle class="dot" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5">'
                    f"<title>{x:g}: {y:.3f}{escape(note)}</title></circle>")
        if i % every == 0 or i == len(points) - 1:
            body.append(f'<text class="small" x="{px(x):.1f}" y="{top_pad + plot_h + 16}" '
                        f'text-anchor="middle">{x:g}</text>')
            if len(points) <= 12:
                body.append(f'<text class="small" x="{px(x):.1f}" y="{py(y) - 8:.1f}" '
                            f'text-anchor="middle">{y:.2f}</text>')
    if x_label:
        body.append(f'<text class="muted" x="{left + span / 2}" y="{height - 6}" text-anchor="middle">'
                    f"{escape(x_label)}</text>")
    return _svg(height, "".join(body), label)


def _axes(left: float, top: float, span: float, plot_h: float, y_max: float, y_label: str, *,
          integer: bool) -> str:
    parts = []
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h - frac * plot_h
        value = frac * y_max
        text = f"{value:.0f}" if integer else f"{value:.2g}"
        parts.append(f'<line class="grid" x1="{left}" x2="{left + span}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text class="small" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    if y_label:
        parts.append(f'<text class="muted" transform="translate(12 {top + plot_h / 2:.0f}) rotate(-90)" '
                     f'text-anchor="middle">{escape(y_label)}</text>')
    return "".join(parts)


def histogram_bins(values: Sequence[float], *, max_distinct: int = 11,
                   bins: int = 10) -> list[tuple[str, float]]:
    """Counts per distinct value when there are few (binary or graded rewards), else per bin."""
    if not values:
        return []
    distinct = sorted(set(values))
    if len(distinct) <= max_distinct:
        return [(f"{v:g}", float(sum(1 for x in values if x == v))) for v in distinct]
    lo, hi = distinct[0], distinct[-1]
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return [(f"{lo + i * width:.2g}–{lo + (i + 1) * width:.2g}", float(c)) for i, c in enumerate(counts)]


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def seconds(value: float) -> str:
    """A duration for people: ``850 ms``, ``12.3 s``, ``4 min 05 s``."""
    if value < 1:
        return f"{value * 1000:.0f} ms" if value >= 0.001 else f"{value * 1000:.2f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{int(value // 60)} min {int(value % 60):02d} s"
