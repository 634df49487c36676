"""Bar charts drawn on the server as inline SVG. No I/O, no script.

The spend and usage pages need bars per day (one colour per model or face
when a day is split, :func:`stacked_chart`) and per name, and people read
them faster than tables. Drawing them here rather than with a
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

__all__ = ["column_chart", "row_chart", "stacked_chart"]

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


# Eight colours that stay apart for the common colour-vision deficiencies (Okabe-Ito,
# black left out); a ninth series and more share "other".
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
           "#999999")  # fmt: skip


def stacked_chart(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[Decimal]]],
    unit: str,
    *,
    width: int = 640,
    height: int = 240,
) -> Markup:
    """Vertical bars over a sequence (days), each stacked from its series' values (one
    value per label in each), with a legend; the tallest stack reaches the top. More
    series than :data:`PALETTE` has colours: the smallest are summed as "other"."""
    kept = sorted(series, key=lambda s: sum(s[1], Decimal(0)), reverse=True)
    if len(kept) > len(PALETTE):
        rest = kept[len(PALETTE) - 1 :]
        other = [sum((s[1][i] for s in rest), Decimal(0)) for i in range(len(labels))]
        kept = [*kept[: len(PALETTE) - 1], ("other", other)]
    legend_rows = (len(kept) + 2) // 3
    top, bottom, left = 16, 28 + legend_rows * 16, 8
    plot_h = height - top - bottom
    totals = [sum((s[1][i] for s in kept), Decimal(0)) for i in range(len(labels))]
    most = max(totals, default=Decimal(0))
    slot = (width - left * 2) / max(len(labels), 1)
    bar_w = max(slot * 0.7, 1.0)
    desc = "; ".join(
        f"{label}: " + ", ".join(f"{name} {_fmt(values[i])}" for name, values in kept
                                 if values[i] > 0) + f" ({_fmt(totals[i])} {unit})"
        for i, label in enumerate(labels) if totals[i] > 0
    ) or "no data"  # fmt: skip
    out = [_head(chart_id, title, desc, width, height)]
    base = top + plot_h
    out.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{width - left}" y2="{base}"/>')
    every = max(1, len(labels) // 8)
    for i, label in enumerate(labels):
        x = left + i * slot + (slot - bar_w) / 2
        y = float(base)
        for n, (name, values) in enumerate(kept):
            value = values[i]
            if value <= 0 or most <= 0:
                continue
            h = max(float(value / most) * plot_h, 0.5)
            y -= h
            out.append(
                f'<rect class="seg" fill="{PALETTE[n]}" x="{x:.1f}" y="{y:.1f}" '
                f'width="{bar_w:.1f}" height="{h:.1f}"><title>{escape(label)}, {escape(name)}: '
                f"{escape(_fmt(value))} {escape(unit)}</title></rect>"
            )
        if i % every == 0 or i == len(labels) - 1:
            out.append(
                f'<text class="tick" x="{x + bar_w / 2:.1f}" y="{base + 16}" '
                f'text-anchor="middle">{escape(label[5:] or label)}</text>'
            )
    for n, (name, _) in enumerate(kept):
        lx, ly = left + (n % 3) * (width - left * 2) / 3, base + 30 + (n // 3) * 16
        shown = name if len(name) <= 26 else name[:25] + "…"
        out.append(
            f'<rect fill="{PALETTE[n]}" x="{lx:.1f}" y="{ly - 9}" width="10" height="10"/>'
            f'<text class="label" x="{lx + 14:.1f}" y="{ly}">{escape(shown)}</text>'
        )
    out.append(
        f'<text class="peak" x="{left}" y="{top - 4}">max {escape(_fmt(most))} '
        f"{escape(unit)}</text>"
    )
    out.append("</svg>")
    return Markup("".join(out))
