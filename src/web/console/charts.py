"""Bar charts drawn on the server as inline SVG. No I/O, no script.

The spend pages need three charts (cost per day, per model, per tool), and
people read them faster than tables. Drawing them here rather than with a
JavaScript chart library means nothing to vendor or build, nothing for the
Content-Security-Policy to allow, and charts that work with script off,
print, and scale to a phone's width (a ``viewBox`` and CSS). Each chart is an
``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that states the figures, and
each bar has a ``<title>`` of its own (a tooltip, and what a screen reader
reads); the page shows the same figures as a table beside it.

Every label is escaped: model, tool and principal names are data.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from markupsafe import Markup, escape

__all__ = ["column_chart", "row_chart"]

Point = tuple[str, Decimal]


def _fmt(value: Decimal) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _head(chart_id: str, title: str, desc: str, width: int, height: int) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" preserveAspectRatio="xMinYMin meet">'
        f'<title id="{chart_id}-t">{escape(title)}</title>'
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>'
    )


def column_chart(
    chart_id: str,
    title: str,
    points: Sequence[Point],
    unit: str,
    *,
    width: int = 640,
    height: int = 220,
) -> Markup:
    """Vertical bars over a sequence (days), the largest reaching the top."""
    top, bottom, left = 16, 28, 8
    plot_h = height - top - bottom
    most = max((v for _, v in points), default=Decimal(0))
    slot = (width - left * 2) / max(len(points), 1)
    bar_w = max(slot * 0.7, 1.0)
    desc = "; ".join(f"{label}: {_fmt(v)} {unit}" for label, v in points) or "no data"
    out = [_head(chart_id, title, desc, width, height)]
    out.append(
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" '
        f'x2="{width - left}" y2="{top + plot_h}"/>'
    )
    every = max(1, len(points) // 8)
    for i, (label, value) in enumerate(points):
        h = 0.0 if most <= 0 else float(value / most) * plot_h
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h - h
        out.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
            f'height="{max(h, 0.5 if value > 0 else 0):.1f}">'
            f"<title>{escape(label)}: {escape(_fmt(value))} {escape(unit)}</title></rect>"
        )
        if i % every == 0 or i == len(points) - 1:
            out.append(
                f'<text class="tick" x="{x + bar_w / 2:.1f}" y="{height - 8}" '
                f'text-anchor="middle">{escape(label[5:] or label)}</text>'
            )
    out.append(
        f'<text class="peak" x="{left}" y="{top - 4}">max {escape(_fmt(most))} '
        f"{escape(unit)}</text>"
    )
    out.append("</svg>")
    return Markup("".join(out))


def row_chart(
    chart_id: str,
    title: str,
    points: Sequence[Point],
    unit: str,
    *,
    width: int = 640,
    row: int = 26,
) -> Markup:
    """Horizontal bars, one per name (models, tools, principals), largest first."""
    ranked = sorted(points, key=lambda p: p[1], reverse=True)
    label_w, value_w, pad = 190, 120, 6
    height = max(len(ranked), 1) * row + pad * 2
    plot_w = width - label_w - value_w
    most = max((v for _, v in ranked), default=Decimal(0))
    desc = "; ".join(f"{label}: {_fmt(v)} {unit}" for label, v in ranked) or "no data"
    out = [_head(chart_id, title, desc, width, height)]
    for i, (label, value) in enumerate(ranked):
        y = pad + i * row
        w = 0.0 if most <= 0 else float(value / most) * plot_w
        shown = label if len(label) <= 26 else label[:25] + "…"
        out.append(
            f'<text class="label" x="{label_w - 8}" y="{y + row * 0.65:.1f}" '
            f'text-anchor="end">{escape(shown)}</text>'
        )
        shown_w = max(w, 0.5 if value > 0 else 0)
        out.append(
            f'<rect class="bar" x="{label_w}" y="{y + 4}" width="{shown_w:.1f}" '
            f'height="{row - 8}"><title>{escape(label)}: {escape(_fmt(value))} {escape(unit)}'
            "</title></rect>"
        )
        out.append(
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + row * 0.65:.1f}">'
            f"{escape(_fmt(value))}</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))
