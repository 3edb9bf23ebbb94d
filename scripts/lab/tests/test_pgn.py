"""lab.pgn: fastchess's comments, the tag reader, the tree's moves and their depth margin, clocks. The expected counts
of deepen16-first-pair.pgn (the first game pair of docs/strength/deepen-1600/vs-sf-deepen16.pgn.xz) are those the
former scripts/tree-moves and scripts/depth-margin printed for it."""

import os
import tempfile
import unittest

from lab import pgn

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
PAIR = os.path.join(FIXTURES, "deepen16-first-pair.pgn")
MARGINS = os.path.join(FIXTURES, "margins.pgn")


class Comments(unittest.TestCase):
    def test_fastchess_comment(self):
        self.assertEqual(pgn.parse_comment("+0.13/27 0.000s, tl=2.040s"), pgn.Comment("+0.13", 27, 0.0, 2.04))
        self.assertEqual(pgn.parse_comment("-0.14/14 0.206s"), pgn.Comment("-0.14", 14, 0.206, None))

    def test_mates_and_negative_clocks(self):
        self.assertEqual(pgn.parse_comment("M3/30 0.012s").score, "M3")
        self.assertEqual(pgn.parse_comment("-M5/22 0.150s, tl=0.3s").depth, 22)
        self.assertEqual(pgn.parse_comment("+1.00/9 0.050s, tl=-0.025s").left, -0.025)

    def test_no_comment(self):
        self.assertIsNone(pgn.parse_comment(""))
        self.assertIsNone(pgn.parse_comment("book"))
        self.assertIsNone(pgn.parse_comment(None))

    def test_the_tree_rule(self):
        self.assertTrue(pgn.is_tree_answer(pgn.parse_comment("+0.1/16 0.004s")))
        self.assertFalse(pgn.is_tree_answer(pgn.parse_comment("+0.1/16 0.005s")))
        self.assertTrue(pgn.is_search(pgn.parse_comment("+0.1/16 0.005s")))
        self.assertFalse(pgn.is_tree_answer(None))
        self.assertFalse(pgn.is_search(None))

    def test_the_runners_marks_win_over_the_clock(self):
        # With pondering a tree answer after a ponderhit may take 12 ms and a search after one 1 ms: the marks of
        # scripts/match's runner say which was which.
        slow_tree = pgn.parse_comment("+0.30/18 0.012s, tree")
        self.assertEqual(slow_tree, pgn.Comment("+0.30", 18, 0.012, None, "tree"))
        self.assertTrue(pgn.is_tree_answer(slow_tree))
        self.assertFalse(pgn.is_search(slow_tree))
        fast_search = pgn.parse_comment("-0.10/15 0.001s, search")
        self.assertFalse(pgn.is_tree_answer(fast_search))
        self.assertTrue(pgn.is_search(fast_search))
        self.assertEqual(pgn.parse_comment("+0.1/16 0.004s, tl=1.2s, tree").source, "tree")
        self.assertIsNone(pgn.parse_comment("+0.1/16 0.004s, treeish").source)
        self.assertIsNone(pgn.parse_comment("+0.1/16 0.004s").source)

    def test_marked_game_counted_by_its_marks(self):
        # A pondering game of scripts/match's runner: deeptree's 1. e4 a tree answer in 12 ms, 2. Nf3 a search that
        # came in 1 ms after a ponderhit; Stockfish's replies searches (2... Nc6 in 2 ms after a ponderhit).
        marked = ('[White "deeptree"]\n[Black "stockfish"]\n[Result "*"]\n\n'
                  '1. e4 { +0.30/18 0.012s, tree } 1... e5 { -0.20/14 0.080s, search } '
                  '2. Nf3 { +0.25/15 0.001s, search } 2... Nc6 { -0.22/13 0.002s, search } *\n')
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "marked.pgn")
            with open(path, "w") as handle:
                handle.write(marked)
            deeptree, stockfish = pgn.count_tree_moves([path], ["deeptree", "stockfish"])
        self.assertEqual((deeptree.opening, dict(deeptree.opening_depths)), (1, {18: 1}))
        self.assertEqual(deeptree.own_searches, [15])
        self.assertEqual(stockfish.total, 0)
        self.assertEqual(stockfish.own_searches, [14, 13])
        # The tree answer's margin: 18 against the mean of Stockfish's searches beside it (only 1... e5, 14).
        self.assertEqual(deeptree.margins, [(1, 4)])


class Tags(unittest.TestCase):
    def test_tag_games(self):
        games = list(pgn.tag_games(PAIR))
        self.assertEqual([(g["White"], g["Black"], g["Result"]) for g in games],
                         [("deeptree", "stockfish", "1/2-1/2"), ("stockfish", "deeptree", "1/2-1/2")])
        self.assertFalse(any(g["time forfeit"] for g in games))

    def test_time_forfeit_and_scores(self):
        (tags,) = pgn.tag_games(MARGINS)
        self.assertTrue(tags["time forfeit"])
        self.assertEqual(pgn.player_score(tags, "deeptree"), 1.0)
        self.assertEqual(pgn.player_score(tags, "stockfish"), 0.0)
        self.assertIsNone(pgn.player_score(tags, "someone else"))
        self.assertIsNone(pgn.player_score(dict(tags, Result="*"), "deeptree"))


class TreeMoves(unittest.TestCase):
    def test_counts_of_a_committed_pair(self):
        deeptree, stockfish = pgn.count_tree_moves([PAIR], ["deeptree", "stockfish"])
        self.assertEqual((deeptree.games, deeptree.moves, deeptree.opening, deeptree.later), (2, 141, 15, 6))
        self.assertEqual(deeptree.per_game, [9, 6])
        self.assertEqual(dict(deeptree.opening_depths), {14: 2, 16: 7, 17: 1, 18: 2, 19: 2, 27: 1})
        self.assertEqual(deeptree.total, 21)
        self.assertEqual(len(deeptree.margins), 21)
        report = deeptree.report()
        self.assertEqual(report[0], "2 games, 141 deeptree moves, 15 from the tree (marked so, or answered in under "
                                    "5 ms, in the first 15 moves): 7.50 a game; 6 so answered later")
        self.assertEqual(report[1], "tree moves per game: 9 6")
        self.assertEqual(report[2], "depths claimed: 14: 2, 16: 7, 17: 1, 18: 2, 19: 2, 27: 1")
        self.assertIn("depth margin: +1.67 plies over 21 tree moves with an opponent's search next to them "
                      "(sd 3.67; median +2.0)", report)
        self.assertIn("  moves   1-5:    10 answers, margin +3.10", report)
        self.assertIn("  moves  6-10:     5 answers, margin +0.90", report)
        self.assertIn("  moves   16+:     6 answers, margin -0.08", report)
        self.assertEqual(report[-1], "mean depth a search (moves of 5 ms or more), opponent (stockfish): 19.84 over "
                                     "141 moves")
        self.assertEqual((stockfish.total, len(stockfish.opponent_searches)), (0, 120))
        self.assertAlmostEqual(sum(stockfish.opponent_searches) / 120, 20.25)

    def test_margin_by_hand(self):
        deeptree, stockfish = pgn.count_tree_moves([MARGINS])
        self.assertEqual((deeptree.player, stockfish.player), ("deeptree", "stockfish"))
        # e4 (20) beside e5 (10): +10; Nf3 (18) between e5 (10) and Nc6 (12): +7; Ba4 (16) has no search beside it.
        self.assertEqual(deeptree.margins, [(1, 10), (2, 7)])
        self.assertEqual(deeptree.per_game, [3])
        self.assertEqual(deeptree.own_searches, [11])
        self.assertEqual(deeptree.opponent_searches, [10, 12])
        # a6 (14) between Bb5 (11) and Ba4 (a tree answer, no search): +3.
        self.assertEqual(stockfish.margins, [(3, 3)])

    def test_opening_moves(self):
        (deeptree,) = pgn.count_tree_moves([MARGINS], ["deeptree"], opening_moves=1)
        self.assertEqual((deeptree.opening, deeptree.later, deeptree.total), (1, 2, 3))

    def test_games_without_the_player(self):
        (nobody,) = pgn.count_tree_moves([MARGINS], ["nobody"])
        self.assertEqual(nobody.games, 0)

    def test_tree_answers(self):
        answers = list(pgn.tree_answers([MARGINS], "deeptree"))
        self.assertEqual([move.uci() for _, move, _ in answers], ["e2e4", "g1f3", "b5a4"])
        self.assertEqual([c.depth for _, _, c in pgn.tree_answers([MARGINS], "deeptree", claimed=(17, 20))],
                         [20, 18])
        board, move, _ = answers[1]
        self.assertTrue(board.is_legal(move))


class Clocks(unittest.TestCase):
    def test_clocks(self):
        engines = pgn.clocks([MARGINS])
        deeptree, stockfish = engines["deeptree"], engines["stockfish"]
        self.assertEqual((deeptree.moves, deeptree.depth, deeptree.first.moves), (4, 65, 1))
        self.assertAlmostEqual(deeptree.time, 0.304)
        self.assertEqual(stockfish.least_left, -0.004)
        self.assertEqual((deeptree.time_losses, stockfish.time_losses), (0, 1))
        self.assertEqual((deeptree.games, stockfish.games), (1, 1))

    def test_phases(self):
        engines = pgn.clocks([MARGINS], phases=(2,))
        deeptree, stockfish = engines["deeptree"], engines["stockfish"]
        # deeptree: 1. e4 and 2. Nf3 at once from the tree (depths 20 and 18); 3. Bb5 a search, 4. Ba4 at once.
        self.assertEqual([(p.moves, p.depth) for p in deeptree.phases], [(2, 38), (2, 27)])
        self.assertAlmostEqual(deeptree.phases[0].time, 0.003)
        self.assertAlmostEqual(deeptree.phases[1].time, 0.301)
        self.assertEqual([(p.moves, p.depth) for p in stockfish.phases], [(2, 22), (1, 14)])
        self.assertEqual(pgn.phase_names((2,)), ["1-2", "3+"])
        self.assertEqual(pgn.phase_names((10, 30)), ["1-10", "11-30", "31+"])
        self.assertEqual(len(pgn.clocks([MARGINS])["deeptree"].phases), 1)


if __name__ == "__main__":
    unittest.main()
