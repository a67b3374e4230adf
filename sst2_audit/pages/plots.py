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


def _figure(width: float, height: float, **grid):
    warming.wait("plots")  # a set-up started early (audit.runner) finishes first
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update({"svg.hashsalt": "sst2-audit", "svg.fonttype": "none", "font.size": 9,
                                "font.family": "DejaVu Sans"})
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=(width, height), **grid)


def _svg(plt, figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: no XML declaration or DOCTYPE


@functools.lru_cache(maxsize=4)  # the public and the private page show the same plot: drawn once
def margin_plot(margins: tuple, correct: tuple, title: str, rasterized: bool = False) -> str:
    """One point per question, ordered by margin (gold score minus the best other score): above 0
    the gold answer won, green = correct prediction, red = wrong. rasterized: the markers drawn as one image in
    the SVG (a full split's page stays small)."""
    plt, (figure, axes) = _figure(7.0, 2.6)
    order = sorted(range(len(margins)), key=lambda i: margins[i])
    xs = list(range(1, len(order) + 1))
    ys = [margins[i] for i in order]
    colours = [CORRECT if correct[i] else WRONG for i in order]
    axes.axhline(0.0, color="#888888", linewidth=0.8)
    axes.scatter(xs, ys, c=colours, s=14, rasterized=rasterized)
    axes.set_xlabel("questions, ordered by margin")
    axes.set_ylabel("margin (nats)")
    axes.set_title(title)
    axes.grid(axis="y", color="#dddddd", linewidth=0.5)
    return _svg(plt, figure)


@functools.lru_cache(maxsize=4)
def study_plot(variants: tuple, values: tuple, differences: tuple, intervals: tuple, differs: tuple, margins: tuple,
               metric: str) -> str:
    """A study at a glance. Left: each variant's metric, and its paired difference from the base with the 95%
    Bonett-Price interval, coloured by the decision (Holm-adjusted exact McNemar p below 0.05; the base's own row is its
    value alone). Right: every question (rows, ordered by the base's margin)
    under every variant (columns), green where the variant answered it right, red where wrong, paler the
    closer the call on that variant's own scale: the questions that flip between variants stand out as mixed
    rows."""
    from matplotlib.colors import LinearSegmentedColormap

    plt, (figure, (left, right)) = _figure(8.0, max(2.6, 1.0 + 0.34 * len(variants)), ncols=2,
                                           gridspec_kw={"width_ratios": [1.3, 1.0]})
    rows = list(range(len(variants)))[::-1]
    for row, value, difference, interval, shown in zip(rows, values, differences, intervals, differs):
        if interval is None:
            left.plot([0.0], [row], marker="D", color="#333333")
        else:
            left.plot(list(interval), [row, row], color="#555555", linewidth=1.6)
            left.plot([difference], [row], marker="o", color=(CORRECT if difference > 0 else WRONG) if shown else
                      "#555555")
    left.axvline(0.0, color="#888888", linewidth=0.8)
    left.set_yticks(rows, [f"{number}: {name}{' (base)' if number == 0 else ''}\n{metric} {value:.4f}"
                           for number, (name, value) in enumerate(zip(variants, values))])
    left.set_xlabel(f"{metric}: variant - base (95% Bonett-Price interval)")
    left.grid(axis="x", color="#dddddd", linewidth=0.5)
    colours = LinearSegmentedColormap.from_list("margin", [WRONG, "#f4f4f4", CORRECT])
    order = sorted(range(len(margins[0])), key=lambda i: margins[0][i])
    # each column on its own scale (its largest |margin|): a variant with small margins keeps its right and wrong
    bounds = [max(1e-9, max(abs(m) for m in column)) for column in margins]
    grid = [[margins[v][i] / bounds[v] for v in range(len(variants))] for i in order]
    right.imshow(grid, aspect="auto", cmap=colours, vmin=-1.0, vmax=1.0, interpolation="nearest")
    right.set_xticks(range(len(variants)), [str(n) for n in range(len(variants))])
    right.set_xlabel("variant (0 = base)")
    right.set_ylabel("questions, by the base's margin")
    right.set_yticks([])
    return _svg(plt, figure)
