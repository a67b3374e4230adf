"""Plots for report.html, drawn with matplotlib as inline SVG text.

The SVG must be the same bytes for the same records on every machine (the audit regenerates
report.html and compares it): no date in the metadata, a fixed id salt, text kept as text
(no font glyph paths), and the pinned matplotlib with its bundled font.
"""

import functools
import io

from sst2_audit.util import warm as warming

CORRECT, WRONG = "#1b7f3b", "#c0392b"


def warm() -> None:
    """Import matplotlib ahead of time (the independent path's thread does it while lm-eval still runs)."""
    _figure(1.0, 1.0)[0].close("all")


def _figure(width: float, height: float):
    warming.wait("plots")  # a set-up started early (audit.runner) finishes first
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update({"svg.hashsalt": "sst2-audit", "svg.fonttype": "none", "font.size": 9,
                                "font.family": "DejaVu Sans"})
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=(width, height))


def _svg(plt, figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML declaration or DOCTYPE


@functools.lru_cache(maxsize=4)  # the public and the private page show the same plot: drawn once
def margin_plot(margins: tuple, correct: tuple, title: str) -> str:
    """One point per question, ordered by margin (gold score minus the best other score): above 0
    the gold answer won, green = correct prediction, red = wrong."""
    plt, (figure, axes) = _figure(7.0, 2.6)
    order = sorted(range(len(margins)), key=lambda i: margins[i])
    xs = list(range(1, len(order) + 1))
    ys = [margins[i] for i in order]
    colours = [CORRECT if correct[i] else WRONG for i in order]
    axes.axhline(0.0, color="#888888", linewidth=0.8)
    axes.scatter(xs, ys, c=colours, s=14)
    axes.set_xlabel("questions, ordered by margin")
    axes.set_ylabel("margin (nats)")
    axes.set_title(title)
    axes.grid(axis="y", color="#dddddd", linewidth=0.5)
    return _svg(plt, figure)
