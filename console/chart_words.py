"""Words in the console's pictures: how wide they are, and where they break.

svg.chart text is 12 px (console.css), and an SVG cannot wrap text, so the server does, from the advance
widths of DejaVu Sans (the fallback of the console's font stack, and among the widest of it), in ems,
rounded up: an estimate that errs wide keeps every label inside its picture in any of those fonts
(tests/console/test_browser_chart_ends.py measures it in Chromium).
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import escape

FONT_PX = 12
LINE_PX = 15  # from one line of a wrapped label to the next
_EMS = {**dict.fromkeys("iljI.,:;'|!", 0.32), **dict.fromkeys(" ", 0.33), **dict.fromkeys("()[]{}/\\-`", 0.42),
        **dict.fromkeys("frtJ", 0.45), **dict.fromkeys("mwMW%@", 1.0), **dict.fromkeys("0123456789", 0.66)}


def text_width(text: str, *, bold: bool = False) -> float:
    """The width `text` takes in a chart, in SVG units (pixels at the picture's own size)."""
    ems = sum(_EMS.get(c, 0.78 if c.isupper() else 0.66 if c.isascii() else 0.9) for c in text)
    return ems * FONT_PX * (1.1 if bold else 1.0)


def wrap(text: str, width: float, *, bold: bool = False, most: int = 4) -> list[str]:
    """`text` in lines no wider than `width`, broken at spaces (a word wider than a line is cut where it
    must), at most `most` lines, the last one ending in "…" when the text is longer still."""
    lines: list[str] = []
    for word in text.split():
        while text_width(word, bold=bold) > width:  # wider than a line (an id): cut after - / . _ : if it can
            cut = max((i for i in range(1, len(word)) if text_width(word[:i], bold=bold) <= width), default=1)
            cut = max((i + 1 for i in range(cut - 1) if word[i] in "-/._:"), default=cut)
            lines.append(word[:cut])
            word = word[cut:]
        if lines and text_width(f"{lines[-1]} {word}", bold=bold) <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    if len(lines) > most:
        last = lines[most - 1]
        while last and text_width(last + " …", bold=bold) > width:
            last = last[:-1]
        lines = lines[:most - 1] + [last.rstrip() + " …"]
    return lines or [""]


def svg_text(x: float, y: float, lines: Sequence[str], *, css: str = "label", anchor: str = "start",
             extra: str = "") -> str:
    """One <text> of wrapped lines, the first line's baseline at `y`; every line escaped."""
    spans = escape(lines[0]) if len(lines) == 1 else "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else LINE_PX}">{escape(line)}</tspan>' for i, line in enumerate(lines))
    anchored = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return f'<text class="{css}" x="{x:.1f}" y="{y:.1f}"{anchored}{extra}>{spans}</text>'
