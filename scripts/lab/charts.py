"""The lab's charts, as SVG written by hand (no plotting library): Elo against CPU-minutes of growth
(scripts/elo-chart), Elo against the opponent's depth a move with its fitted line (scripts/elo-depth), the duel's
mean verdict against the budget (scripts/duel report --svg), and the host's speed-up against its workers
(scripts/host-scaling).
"""

import json
import math
import sys
from collections import namedtuple

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22"]


def read_elo_budget(path):
    """The points of a JSON-lines file (method, cpu_minutes, games, elo, margin, ...); a line that cannot be read is
    reported on stderr with its number and skipped."""
    points = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                points.append((row["method"], float(row["cpu_minutes"]), float(row["elo"]), float(row["margin"]),
                               int(row["games"])))
            except (ValueError, KeyError, TypeError) as e:
                print(f"{path}:{number}: skipped: {e}", file=sys.stderr)
    return points



def elo_budget(points):
    """The SVG of Elo against CPU-minutes of growth: points (method, cpu_minutes, elo, margin, games), one curve a
    method joined in budget order, each point with its 95 % interval; the x axis log-scaled."""
    methods = list(dict.fromkeys(p[0] for p in points))
    # The legend, one line a method, sits above the plot.
    legend = 16 * len(methods) + 8
    width, plot_height, pad = 680, 356, 64
    height = legend + plot_height + pad
    xs = [math.log2(p[1]) for p in points]
    ys = [p[2] - p[3] for p in points] + [p[2] + p[3] for p in points] + [0]
    x0, x1 = min(xs) - 0.4, max(xs) + 0.4
    y0, y1 = math.floor(min(ys) / 10) * 10 - 5, math.ceil(max(ys) / 10) * 10 + 5

    def px(x):
        return pad + (x - x0) / (x1 - x0) * (width - 2 * pad)

    def py(y):
        return height - pad - (y - y0) / (y1 - y0) * (plot_height - pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{py(0):.1f}" x2="{width - pad}" y2="{py(0):.1f}" stroke="#999" '
             f'stroke-dasharray="4"/>',
             f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">CPU-minutes of growth (log scale)</text>',
             f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" text-anchor="middle">Elo against '
             f'Stockfish, 95 % interval</text>']
    for tick in range(int(y0) + (-int(y0)) % 10, int(y1) + 1, 10):
        parts.append(f'<text x="{pad - 8}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:+d}</text>')
    # One label for budgets that lie close together (118.5 stands for 118.5 to 119.2): none within 30 px of the last.
    last = None
    for minutes in sorted({p[1] for p in points}):
        x = px(math.log2(minutes))
        if last is None or x - last >= 30:
            parts.append(f'<text x="{x:.1f}" y="{height - pad + 18}" text-anchor="middle">{minutes:g}</text>')
            last = x
    for i, method in enumerate(methods):
        colour = COLOURS[i % len(COLOURS)]
        mine = sorted((p for p in points if p[0] == method), key=lambda p: p[1])
        shift = (i - (len(methods) - 1) / 2) * 6
        line = []
        for _, minutes, elo, margin, games in mine:
            x = px(math.log2(minutes)) + shift
            parts.append(f'<line x1="{x:.1f}" y1="{py(elo - margin):.1f}" x2="{x:.1f}" y2="{py(elo + margin):.1f}" '
                         f'stroke="{colour}" stroke-width="2"/>')
            parts.append(f'<circle cx="{x:.1f}" cy="{py(elo):.1f}" r="4" fill="{colour}"><title>{method}: '
                         f'{minutes:g} CPU-minutes, {elo:+.1f} +/- {margin:.1f} over {games} games</title></circle>')
            line.append(f"{x:.1f},{py(elo):.1f}")
        parts.append(f'<polyline points="{" ".join(line)}" fill="none" stroke="{colour}"/>')
        parts.append(f'<text x="{pad + 10}" y="{20 + 16 * i}" fill="{colour}">{method}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"



def _frame(width, height, pad, bounds, x_label, y_label):
    """A chart's scales and opening SVG: the mappings of data to pixels for `bounds` (x0, x1, y0, y1) inside `pad`,
    and the parts that start it (the canvas, the dashed line at 0, the axes' labels)."""
    x0, x1, y0, y1 = bounds

    def px(x):
        return pad + (x - x0) / (x1 - x0) * (width - 2 * pad)

    def py(y):
        return height - pad - (y - y0) / (y1 - y0) * (height - 2 * pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{py(0):.1f}" x2="{width - pad}" y2="{py(0):.1f}" stroke="#999" '
             f'stroke-dasharray="4"/>',
             f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle">{x_label}</text>',
             f'<text x="15" y="{height / 2}" transform="rotate(-90 15 {height / 2})" text-anchor="middle">{y_label}'
             f'</text>']
    return px, py, parts


def duel_verdicts(rows, form):
    """The SVG of the duel's mean verdict against log2(budget), with its intervals: rows of scripts/duel report
    (budget, label, mean_verdict, interval)."""
    width, height, pad = 640, 400, 60
    xs = [math.log2(r["budget"]) for r in rows]
    ys = [v for r in rows for v in r["interval"]] + [0]
    x0, x1 = min(xs) - 0.5, max(xs) + 0.5
    y0, y1 = min(ys) - 5, max(ys) + 5

    px, py, parts = _frame(width, height, pad, (x0, x1, y0, y1), f"budget ({form}, log scale)",
                           "mean verdict, cp (above 0: Stockfish better)")
    points = []
    for r, x in zip(rows, xs):
        low, high = r["interval"]
        parts.append(f'<line x1="{px(x):.1f}" y1="{py(low):.1f}" x2="{px(x):.1f}" y2="{py(high):.1f}" '
                     f'stroke="#1f77b4" stroke-width="2"/>')
        parts.append(f'<circle cx="{px(x):.1f}" cy="{py(r["mean_verdict"]):.1f}" r="4" fill="#1f77b4"/>')
        parts.append(f'<text x="{px(x):.1f}" y="{height - pad + 18}" text-anchor="middle">{r["label"]}</text>')
        points.append(f"{px(x):.1f},{py(r['mean_verdict']):.1f}")
    parts.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="#1f77b4"/>')
    for tick in range(int(math.floor(y0 / 10)) * 10, int(y1) + 1, 10):
        parts.append(f'<text x="{pad - 8}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:+d}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"




def host_scaling(runs, scores):
    """The SVG of `deeptree bench host` runs (one `--json` object each: workers, speedup, utilization, depth,
    latency_ms) against the ideal speed-up, with one worker at 1; and the lines printed beside it."""
    points = [(1, 1.0, 1.0)] + [(r["workers"], r["speedup"], r["utilization"]) for r in runs]
    width, height, left, bottom, top, right = 600, 360, 60, 50, 30, 80
    max_workers = max(p[0] for p in points)
    max_speedup = max(max_workers, max(p[1] for p in points))

    def x(workers):
        return left + (width - left - right) * workers / max_workers

    def y(value, top_value):
        return height - bottom - (height - bottom - top) * value / top_value

    def polyline(coords, colour, dash=""):
        text = " ".join(f"{a:.1f},{b:.1f}" for a, b in coords)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return f'<polyline points="{text}" fill="none" stroke="{colour}" stroke-width="2"{extra}/>'

    depth, latency = runs[0]["depth"], runs[0]["latency_ms"]
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="18" text-anchor="middle">bench host: {scores} scores, depth {depth}, searches of '
        f'{latency} ms</text>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">workers</text>',
        f'<text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" text-anchor="middle">speed-up</text>',
    ]
    for workers, _, _ in points:
        svg.append(f'<text x="{x(workers):.1f}" y="{height - bottom + 16}" text-anchor="middle">{workers}</text>')
    for tick in range(0, int(max_speedup) + 1, max(1, int(max_speedup) // 8)):
        svg.append(f'<text x="{left - 6}" y="{y(tick, max_speedup) + 4:.1f}" text-anchor="end">{tick}</text>')
    svg.append(polyline([(x(w), y(w, max_speedup)) for w, _, _ in points], "#999", "4 4"))
    svg.append(polyline([(x(w), y(s, max_speedup)) for w, s, _ in points], "#1f5fbf"))
    for w, s, u in points:
        svg.append(f'<circle cx="{x(w):.1f}" cy="{y(s, max_speedup):.1f}" r="3" fill="#1f5fbf"/>')
        if w > 1:
            svg.append(f'<text x="{x(w) + 5:.1f}" y="{y(s, max_speedup) + 16:.1f}">{s:.1f} ({u:.2f})</text>')
    svg.append(f'<text x="{left + 10}" y="{top + 12}" fill="#999">dashed: ideal (speed-up = workers)</text>')
    svg.append(f'<text x="{left + 10}" y="{top + 28}" fill="#1f5fbf">measured speed-up (utilization)</text>')
    svg.append("</svg>")
    lines = [f"{w:>3} workers: speed-up {s:6.2f}, utilization {u:.2f}" for w, s, u in points]
    return "\n".join(svg) + "\n", lines


def read_elo_depth(path):
    """The points of a JSON-lines file of the curve (label, sf_depth, elo, low, high, games, ...); a line that cannot
    be read is reported on stderr with its number and skipped."""
    return _read_curve(path, "sf_depth", report=True)


def read_elo_margin(path):
    """The points of the same file with the tree answers' depth margin in place of Stockfish's depth (label,
    depth_margin, elo, low, high, games): only the lines that give a margin; the others are left out silently (a
    line that cannot be read at all is read_elo_depth's to report)."""
    return _read_curve(path, "depth_margin", report=False)


def _read_curve(path, x_key, report):
    """The curve file's points (label, row[x_key], elo, low, high, games); a line without them is skipped, and
    reported on stderr with its number where `report`."""
    points = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                points.append((str(row["label"]), float(row[x_key]), float(row["elo"]), float(row["low"]),
                               float(row["high"]), int(row["games"])))
            except (ValueError, KeyError, TypeError) as e:
                if report:
                    print(f"{path}:{number}: skipped: {e}", file=sys.stderr)
    return points


Fit = namedtuple("Fit", "intercept slope slope_se zero")
Fit.__doc__ = ("Elo = intercept + slope x, fitted (x: Stockfish's depth, or the tree answers' depth margin); "
               "slope_se: the slope's standard error (the points' variances as known); zero: the x at which the "
               "fitted gain reaches 0 (None where the line does not lean the way that reaches it: a gain that does "
               "not shrink with Stockfish's depth, or does not grow with the margin).")


def fit_line(points, rising):
    """The line through the points (label, x, elo, low, high, games) by least squares, each weighted by the inverse
    variance of its Elo (the interval's half-width over the normal quantile, squared); its zero only where the gain
    grows with x (`rising`) or falls with it (not `rising`), as the caller expects. One point, or points at a
    single x, give no line: None."""
    rows = []
    for _, x, elo, low, high, _ in points:
        sigma = max((high - low) / 2 / 1.959964, 1e-9)
        rows.append((x, elo, 1 / sigma ** 2))
    weight = sum(w for _, _, w in rows)
    if len({x for x, _, _ in rows}) < 2:
        return None
    mean_x = sum(w * x for x, _, w in rows) / weight
    mean_y = sum(w * e for _, e, w in rows) / weight
    sxx = sum(w * (x - mean_x) ** 2 for x, _, w in rows)
    sxy = sum(w * (x - mean_x) * (e - mean_y) for x, e, w in rows)
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    zero = -intercept / slope if (slope > 0 if rising else slope < 0) else None
    return Fit(intercept, slope, math.sqrt(1 / sxx), zero)


def fit_elo_depth(points):
    """Elo against Stockfish's depth a move (fit_line): the gain is expected to shrink as Stockfish searches deeper,
    and its zero is the depth where it is gone."""
    return fit_line(points, rising=False)


def fit_elo_margin(points):
    """Elo against the tree answers' depth margin over the opponent's searches (fit_line): the gain is expected to
    grow with the margin, and its zero is the margin at which the tree's answers gain nothing, the yardstick that
    TreeDepthMargin moves."""
    return fit_line(points, rising=True)


def elo_depth(points):
    """The SVG of Elo against the opponent's mean depth a move: points (label, depth, elo, low, high, games) with
    their 95 % intervals, the weighted line of fit_elo_depth and the depth where it reaches 0."""
    fit = fit_elo_depth(points)
    width, height, pad = 640, 400, 64
    xs = [p[1] for p in points] + ([fit.zero] if fit and fit.zero is not None else [])
    ys = [p[3] for p in points] + [p[4] for p in points] + [0]
    x0, x1 = math.floor(min(xs)) - 1, math.ceil(max(xs)) + 1
    y0, y1 = math.floor(min(ys) / 10) * 10 - 5, math.ceil(max(ys) / 10) * 10 + 5

    px, py, parts = _frame(width, height, pad, (x0, x1, y0, y1), "Stockfish's mean depth a move (plies)",
                           "Elo against Stockfish, 95 % interval")
    for tick in range(int(y0) + (-int(y0)) % 10, int(y1) + 1, 10):
        parts.append(f'<text x="{pad - 8}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:+d}</text>')
    for tick in range(int(x0), int(x1) + 1):
        parts.append(f'<text x="{px(tick):.1f}" y="{height - pad + 18}" text-anchor="middle">{tick}</text>')
    if fit:
        ends = [(x, fit.intercept + fit.slope * x) for x in (x0, x1)]
        parts.append(f'<line x1="{px(ends[0][0]):.1f}" y1="{py(ends[0][1]):.1f}" x2="{px(ends[1][0]):.1f}" '
                     f'y2="{py(ends[1][1]):.1f}" stroke="#d62728" stroke-dasharray="6 3"/>')
        said = f"fit: {fit.intercept:+.1f} {fit.slope:+.2f} x depth"
        if fit.zero is not None:
            parts.append(f'<circle cx="{px(fit.zero):.1f}" cy="{py(0):.1f}" r="4" fill="none" stroke="#d62728"/>')
            said += f"; 0 at {fit.zero:.1f} plies"
        parts.append(f'<text x="{pad + 10}" y="20" fill="#d62728">{said}</text>')
    for label, depth, elo, low, high, games in points:
        x = px(depth)
        parts.append(f'<line x1="{x:.1f}" y1="{py(low):.1f}" x2="{x:.1f}" y2="{py(high):.1f}" stroke="#1f77b4" '
                     f'stroke-width="2"/>')
        parts.append(f'<circle cx="{x:.1f}" cy="{py(elo):.1f}" r="4" fill="#1f77b4"><title>{label}: {elo:+.1f} '
                     f'({low:+.1f} to {high:+.1f}) over {games} games, Stockfish {depth:.1f} plies</title></circle>')
        parts.append(f'<text x="{x + 7:.1f}" y="{py(elo) - 6:.1f}" fill="#1f77b4">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
