"""lab.charts: the committed Elo chart is what the data gives; the other charts are well-formed SVG."""

import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from lab import charts

DOCS = Path(__file__).resolve().parents[3] / "docs"
SVG = "{http://www.w3.org/2000/svg}"


class Charts(unittest.TestCase):
    def test_elo_budget_is_the_committed_chart(self):
        points = charts.read_elo_budget(DOCS / "strength" / "elo-budget.jsonl")
        self.assertEqual(charts.elo_budget(points), (DOCS / "strength" / "elo-budget.svg").read_text())

    def test_elo_depth_is_the_committed_chart(self):
        points = charts.read_elo_depth(DOCS / "strength" / "elo-depth.jsonl")
        self.assertEqual(charts.elo_depth(points), (DOCS / "strength" / "elo-depth.svg").read_text())

    def test_duel_verdicts(self):
        rows = [{"budget": 1_000_000, "label": "1M", "mean_verdict": 0.9, "interval": [-3.9, 5.7]},
                {"budget": 4_000_000, "label": "4M", "mean_verdict": -0.3, "interval": [-2.6, 1.9]}]
        svg = ElementTree.fromstring(charts.duel_verdicts(rows, "nodes"))
        self.assertEqual(len(svg.findall(f"{SVG}circle")), 2)
        self.assertIn("budget (nodes, log scale)", [t.text for t in svg.findall(f"{SVG}text")])

    def test_host_scaling(self):
        runs = [{"workers": w, "speedup": w * 0.9, "utilization": 0.9, "depth": 3, "latency_ms": 20} for w in (2, 8)]
        text, lines = charts.host_scaling(runs, "keyed")
        svg = ElementTree.fromstring(text)
        self.assertEqual(len(svg.findall(f"{SVG}circle")), 3)
        self.assertEqual(lines[0], "  1 workers: speed-up   1.00, utilization 1.00")
        self.assertEqual(lines[2], "  8 workers: speed-up   7.20, utilization 0.90")

    def test_elo_depth_fit_weights_each_point_by_its_interval(self):
        # On a line: the fit is the line, and it crosses 0 where the line does.
        on_line = [(f"p{d}", d, 100 - 5 * d, 100 - 5 * d - 20, 100 - 5 * d + 20, 400) for d in (14.0, 17.0, 20.0)]
        fit = charts.fit_elo_depth(on_line)
        self.assertAlmostEqual(fit.slope, -5.0)
        self.assertAlmostEqual(fit.intercept, 100.0)
        self.assertAlmostEqual(fit.zero, 20.0)
        # A point with a narrow interval pulls the line four times as hard as one with an interval twice as wide.
        pulled = [("a", 10.0, 0.0, -10.0, 10.0, 400), ("b", 10.0, 10.0, -10.0, 30.0, 100), ("c", 20.0, 0.0, -10.0,
                                                                                           10.0, 400)]
        fit = charts.fit_elo_depth(pulled)
        self.assertAlmostEqual(fit.intercept + fit.slope * 10, 2.0)
        # Two points of standard error 1 a ply apart: the slope's standard error is sqrt(1 / sum(w (d - mean)^2)).
        two = [("a", 0.0, 0.0, -1.959964, 1.959964, 9), ("b", 1.0, 0.0, -1.959964, 1.959964, 9)]
        self.assertAlmostEqual(charts.fit_elo_depth(two).slope_se, 2 ** 0.5)
        # A gain that grows with depth never reaches 0; one depth gives no line.
        self.assertIsNone(charts.fit_elo_depth([("a", 14.0, 0.0, -5, 5, 9), ("b", 18.0, 10.0, 5, 15, 9)]).zero)
        self.assertIsNone(charts.fit_elo_depth([("a", 14.0, 0.0, -5, 5, 9), ("b", 14.0, 10.0, 5, 15, 9)]))

    def test_elo_margin_fit_reaches_zero_only_where_the_gain_grows_with_the_margin(self):
        # Gains of 10 Elo a ply of margin, 0 at a margin of +1: the zero is +1; a gain that falls with the margin has
        # none (the opposite of the depth fit, where the gain must fall).
        rising = [(f"m{m}", m, 10 * (m - 1), 10 * (m - 1) - 15, 10 * (m - 1) + 15, 400) for m in (2.5, 5.0)]
        fit = charts.fit_elo_margin(rising)
        self.assertAlmostEqual(fit.slope, 10.0)
        self.assertAlmostEqual(fit.zero, 1.0)
        self.assertIsNone(charts.fit_elo_depth(rising).zero)
        falling = [(label, m, -elo, -high, -low, n) for label, m, elo, low, high, n in rising]
        self.assertIsNone(charts.fit_elo_margin(falling).zero)

    def test_elo_margin_reads_only_the_lines_that_give_a_margin(self):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "curve.jsonl"
            path.write_text('{"label": "a", "sf_depth": 15, "elo": 30, "low": 10, "high": 50, "games": 400, '
                            '"depth_margin": 5.1}\n'
                            '{"label": "b", "sf_depth": 17, "elo": 20, "low": 5, "high": 35, "games": 400}\n'
                            'not json\n')
            self.assertEqual(charts.read_elo_margin(path), [("a", 5.1, 30.0, 10.0, 50.0, 400)])

    def test_elo_depth_draws_each_point_and_the_fit(self):
        points = [("2+0.02", 17.8, 40.0, 20.0, 60.0, 400), ("10+0.1", 21.5, 5.0, -15.0, 25.0, 400)]
        svg = ElementTree.fromstring(charts.elo_depth(points))
        # Two points and the circle where the fit crosses 0: the line through both, 40 - 35 / 3.7 (depth - 17.8).
        self.assertEqual(len(svg.findall(f"{SVG}circle")), 3)
        texts = [t.text for t in svg.findall(f"{SVG}text")]
        self.assertIn("fit: +208.4 -9.46 x depth; 0 at 22.0 plies", texts)


if __name__ == "__main__":
    unittest.main()
