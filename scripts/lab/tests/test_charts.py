"""lab.charts: the committed Elo chart is what the data gives; the other charts are well-formed SVG."""

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


if __name__ == "__main__":
    unittest.main()
