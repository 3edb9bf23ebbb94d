"""lab.growth: the step lines of `deeptree analyze`, classed as exits and answers deepened against the aim."""

import unittest

from lab import growth

LINES = [
    "--for 2+0.02: target depth 13 (27 men or more), 13, 13, 13, 13 (8 or fewer), TreeDepthMargin 0",
    "grow     1: priority 0.0500 = reach 0.0250 x 2^1  (known  0, target 13, aim 16) the tree's move ply  0 of line 1 "
    "to software depth 0 at engine depth 14: 1 evaluations, 0.2 s: r1bqkbnr/1ppp1ppp/p1n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R"
    " w KQkq - 0 1",
    "grow     3: priority 0.0500 = reach 0.0250 x 2^1  (known  0, target 13, aim 16) the replies     ply  0 of line 1 to "
    "software depth 1 at engine depth 14: 2 evaluations, 0.5 s: r1bqkbnr/1ppp1ppp/p1n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R w"
    " KQkq - 0 1",
    "grow    40: priority 0.2000 = reach 0.0250 x 2^3  (known 13, target 13, aim 16) the tree's move a ply deeper ply  2"
    " of line 4 to software depth 0 at engine depth 14: 12 evaluations, 2.5 s: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
    "grow  1234: priority 0.0031 = reach 0.0250 x 2^-3 (known 19, target 13, aim 16) the tree's move a ply deeper ply  0"
    " of line 4 to software depth 6 at engine depth 14: 300 evaluations, 60.0 s: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
    "grow    41: priority 0.0250 = reach 0.0250 x 2^0  (known 16, target 13, aim 16) the tree's move a ply deeper ply  2"
    " of line 4 to software depth 3 at engine depth 14: 20 evaluations, 4.0 s: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
    "grow     2: priority 1.0000 = reach 1.0000 x 2^0  (known 18, target 18, aim 18) the seed itself ply  0 of root to "
    "software depth 2 at engine depth 16: 30 evaluations, 9.5 s: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
    "grow     5: priority 7.629e-7 = reach 0.2000 x 2^-18 (known 18, no target) the seed itself ply  0 of line 2 to "
    "software depth 3 at engine depth 16: 40 evaluations, 12.0 s: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
    "3188 positions grown, 42927 evaluations (890 taken from other searches, 0 failed)",
]


class Steps(unittest.TestCase):
    def test_classes(self):
        self.assertEqual(growth.step_class("the replies", 0, 16), "exit: the replies")
        self.assertEqual(growth.step_class("the tree's move", 0, 16), "exit: the tree's move")
        self.assertEqual(growth.step_class("the tree's move a ply deeper", 15, 16), "answer deepened short of the aim")
        self.assertEqual(growth.step_class("the tree's move a ply deeper", 16, 16), "answer deepened at the aim +0")
        self.assertEqual(growth.step_class("the tree's move a ply deeper", 19, 16), "answer deepened at the aim +3")
        self.assertEqual(growth.step_class("the seed itself", 18, None), "seed deepened itself")

    def test_time_by_class(self):
        tallies = growth.time_by_class(LINES)
        self.assertEqual(tallies["exit: the tree's move"], growth.Tally(1, 1, 0.2))
        self.assertEqual(tallies["exit: the replies"], growth.Tally(1, 2, 0.5))
        self.assertEqual(tallies["answer deepened short of the aim"], growth.Tally(1, 12, 2.5))
        self.assertEqual(tallies["answer deepened at the aim +0"], growth.Tally(1, 20, 4.0))
        self.assertEqual(tallies["answer deepened at the aim +3"], growth.Tally(1, 300, 60.0))
        self.assertEqual(tallies["seed deepened itself"], growth.Tally(2, 70, 21.5))
        self.assertEqual(sum(t.steps for t in tallies.values()), 7, "the other lines are not steps")

    def test_order(self):
        classes = ["answer deepened at the aim +10", "seed deepened itself", "answer deepened at the aim +2",
                   "exit: the replies", "answer deepened short of the aim"]
        self.assertEqual(sorted(classes, key=growth.order), ["exit: the replies", "answer deepened short of the aim",
                                                            "answer deepened at the aim +2",
                                                            "answer deepened at the aim +10", "seed deepened itself"])


if __name__ == "__main__":
    unittest.main()
