"""lab.stats against known figures: fastchess's own results (pentanomial) and scripts/match's committed ones
(trinomial)."""

import math
import unittest

from lab import stats


def shown(estimate):
    """Elo, +/-, LOS (percent) as fastchess prints them, two decimals."""
    return f"{estimate.elo:.2f}", f"{stats.half_width(estimate):.2f}", f"{100 * estimate.los:.2f}"


class Elo(unittest.TestCase):
    def test_known_scores(self):
        self.assertEqual(stats.elo(0.5), 0.0)
        self.assertAlmostEqual(stats.elo(0.75), 400 * math.log10(3))
        self.assertAlmostEqual(stats.elo(0.25), -400 * math.log10(3))
        self.assertAlmostEqual(stats.elo(10 / 11), 400.0)

    def test_clamped_at_the_ends(self):
        self.assertTrue(math.isfinite(stats.elo(1.0)))
        self.assertTrue(math.isfinite(stats.elo(0.0)))
        self.assertAlmostEqual(stats.elo(1.0), -stats.elo(0.0))
        self.assertAlmostEqual(stats.elo(-0.1), stats.elo(0.0))


class Pentanomial(unittest.TestCase):
    # fastchess's results, committed in docs/strength/*/summary.txt: Ptnml(0-2), then "Elo: X +/- Y" and "LOS: Z %".
    FASTCHESS = [
        ([3, 14, 63, 17, 3], ("5.21", "25.28", "65.72")),     # even-30
        ([0, 14, 52, 14, 0], ("0.00", "22.55", "50.00")),     # h2h-120 control
        ([2, 35, 130, 30, 3], ("-2.61", "15.70", "37.24")),   # h2h-120
        ([0, 18, 71, 10, 1], ("-10.43", "19.19", "14.31")),   # held-out
        ([1, 4, 38, 17, 0], ("31.94", "27.49", "98.91")),     # learn-120
        ([0, 15, 61, 22, 2], ("19.13", "22.63", "95.18")),    # learn-30
        ([14, 118, 201, 63, 4], ("-32.67", "13.28", "0.00")),  # one-growth match A, pooled (match-a.txt)
    ]

    def test_fastchess_figures(self):
        for ptnml, expected in self.FASTCHESS:
            with self.subTest(ptnml=ptnml):
                elo, half, los = shown(stats.pentanomial(ptnml))
                self.assertEqual((elo.replace("-0.00", "0.00"), half, los), expected)

    def test_interval_bounds_of_match_a(self):
        estimate = stats.pentanomial([14, 118, 201, 63, 4])
        self.assertEqual((f"{estimate.low:.2f}", f"{estimate.high:.2f}"), ("-46.00", "-19.43"))

    def test_no_spread(self):
        self.assertEqual(stats.pentanomial([0, 0, 4, 0, 0]).los, 0.5)
        self.assertEqual(stats.pentanomial([0, 0, 0, 3, 0]).los, 1.0)

    def test_pair_counts(self):
        self.assertEqual(stats.pair_counts([0, 0.5, 1, 1, 1.5, 2, 2, 2]), [1, 1, 2, 1, 3])

    def test_rejects_bad_counts(self):
        with self.assertRaises(ValueError):
            stats.pentanomial([1, 2, 3])
        with self.assertRaises(ValueError):
            stats.pentanomial([0] * 5)


class Trinomial(unittest.TestCase):
    # scripts/match's python-chess runner (docs/strength/ponder-120/summary.txt) and scripts/pgn-score
    # (docs/strength/deepen-device/summary.txt), as committed.
    def test_match_runner_figures(self):
        for (wins, draws, losses), expected in [
            ((18, 168, 14), ("+6.9", "-12.3", "+26.3", "76.02")),
            ((10, 170, 20), ("-17.4", "-36.0", "+1.2", "3.39")),
        ]:
            estimate = stats.trinomial(stats.game_scores(wins, draws, losses))
            self.assertEqual((f"{estimate.elo:+.1f}", f"{estimate.low:+.1f}", f"{estimate.high:+.1f}",
                              f"{100 * estimate.los:.2f}"), expected)

    def test_pgn_score_figures(self):
        for (wins, draws, losses), expected in [
            ((29, 138, 33), ("-6.9", "26.9", "-33.9", "+19.9", "30.6")),
            ((53, 126, 21), ("+56.1", "29.1", "+27.3", "+85.6", "100.0")),
            ((60, 119, 21), ("+68.6", "30.5", "+38.7", "+99.6", "100.0")),
        ]:
            estimate = stats.trinomial(stats.game_scores(wins, draws, losses))
            self.assertEqual((f"{estimate.elo:+.1f}", f"{stats.half_width(estimate):.1f}", f"{estimate.low:+.1f}",
                              f"{estimate.high:+.1f}", f"{100 * estimate.los:.1f}"), expected)

    def test_los_from_wins_and_losses(self):
        # BayesElo's and cutechess's formula: 1/2 (1 + erf((W - L) / sqrt(2 (W + L)))).
        self.assertAlmostEqual(stats.los_from_wins(10, 5), 0.5 * (1 + math.erf(5 / math.sqrt(30))))
        self.assertEqual(stats.los_from_wins(0, 0), 0.5)
        self.assertEqual(stats.los_from_wins(7, 7), 0.5)

    def test_even_record(self):
        estimate = stats.trinomial(stats.game_scores(5, 10, 5))
        self.assertAlmostEqual(estimate.elo, 0.0)
        self.assertAlmostEqual(estimate.low, -estimate.high)

    def test_no_games(self):
        with self.assertRaises(ValueError):
            stats.trinomial([])


class Wilson(unittest.TestCase):
    def test_known_intervals(self):
        # 140 of 200 (70 %): centre (p + z²/2n) / (1 + z²/n) = 0.6962, spread 0.0630: 63.3 % to 75.9 %.
        low, high = stats.wilson(140, 200)
        self.assertAlmostEqual(low, 0.6332, places=4)
        self.assertAlmostEqual(high, 0.7593, places=4)
        # None and all of 10: the interval keeps a width, inside [0, 1].
        self.assertEqual(stats.wilson(0, 10)[0], 0.0)
        self.assertAlmostEqual(stats.wilson(0, 10)[1], 0.2775, places=4)
        self.assertAlmostEqual(stats.wilson(10, 10)[0], 1 - 0.2775, places=4)
        self.assertAlmostEqual(stats.wilson(10, 10)[1], 1.0)

    def test_bad_counts(self):
        self.assertRaises(ValueError, stats.wilson, 1, 0)
        self.assertRaises(ValueError, stats.wilson, 11, 10)


class Difference(unittest.TestCase):
    def test_half_widths_add_in_quadrature(self):
        # +/- 20 and +/- 15 give +/- 25 (the 3-4-5 triangle); the difference 10 is 0.4 of that, so LOS is the normal
        # probability below 0.4 x 1.96 = 0.784 standard errors: 78.35 %.
        first = stats.Estimate(10.0, -10.0, 30.0, 0.8)
        second = stats.Estimate(0.0, -15.0, 15.0, 0.5)
        delta = stats.difference(first, second)
        self.assertAlmostEqual(delta.elo, 10.0)
        self.assertAlmostEqual(delta.low, -15.0)
        self.assertAlmostEqual(delta.high, 35.0)
        self.assertAlmostEqual(delta.los, 0.78347, places=4)
        back = stats.difference(second, first)
        self.assertAlmostEqual(back.elo, -10.0)
        self.assertAlmostEqual(back.los, 1 - delta.los)

    def test_no_spread(self):
        point = stats.Estimate(5.0, 5.0, 5.0, 1.0)
        self.assertEqual(stats.difference(point, point).los, 0.5)
        self.assertEqual(stats.difference(point, stats.Estimate(0.0, 0.0, 0.0, 0.5)).los, 1.0)


if __name__ == "__main__":
    unittest.main()
