"""lab.exits: where a game leaves the tree, how the reply before it is classed, and the walk's reach."""

import io
import math
import unittest

import chess
import chess.pgn

from lab import exits, pgn

GAME = """[White "tree"]
[Black "engine"]
[Result "*"]

1. e4 {+0.30/20 0.001s} e5 {-0.20/14 0.210s} 2. Nf3 {+0.30/19 0.002s} Nc6 {-0.25/14 0.190s}
3. Bb5 {+0.28/14 0.180s} a6 {-0.20/14 0.200s} *
"""

NEVER = """[White "tree"]
[Black "engine"]
[Result "*"]

1. e4 {+0.30/14 0.300s} e5 {-0.20/14 0.210s} 2. Nf3 {+0.30/14 0.200s} *
"""


def game(text):
    return chess.pgn.read_game(io.StringIO(text))


def shown(**moves):
    return {"moves": [{"uci": uci, "idea": {"cp": cp}} for uci, cp in moves.items()]}


class FindExit(unittest.TestCase):
    def test_the_first_search_after_an_answer(self):
        found = exits.find_exit(game(GAME), "tree", pgn.is_tree_answer, pgn.parse_comment)
        self.assertEqual(found.move_number, 3)
        self.assertEqual(found.reply, chess.Move.from_uci("b8c6"))
        after_nf3 = chess.Board()
        for uci in ("e2e4", "e7e5", "g1f3"):
            after_nf3.push_uci(uci)
        self.assertEqual(found.before.fen(), after_nf3.fen())
        after_nf3.push_uci("b8c6")
        self.assertEqual(found.after.fen(), after_nf3.fen())
        self.assertEqual([(m.uci(), opponents) for _, m, opponents in found.path],
                         [("e2e4", False), ("e7e5", True), ("g1f3", False), ("b8c6", True)])

    def test_no_exit_without_an_answer_first_nor_for_another_player(self):
        self.assertIsNone(exits.find_exit(game(NEVER), "tree", pgn.is_tree_answer, pgn.parse_comment))
        self.assertIsNone(exits.find_exit(game(GAME), "someone", pgn.is_tree_answer, pgn.parse_comment))


class Classify(unittest.TestCase):
    def test_kinds(self):
        self.assertEqual(exits.classify(None, "b8c6"), ("outside", None))
        self.assertEqual(exits.classify({"moves": []}, "b8c6"), ("outside", None))
        self.assertEqual(exits.classify(shown(g8f6=-20, d7d6=-35), "b8c6"), ("never valued", None))
        self.assertEqual(exits.classify(shown(b8c6=-30, g8f6=-20), "b8c6"), ("valued", 10))

    def test_mates_rank_beyond_centipawns(self):
        self.assertGreater(exits.centipawns({"mate": 3}), 10000)
        self.assertLess(exits.centipawns({"mate": -3}), -10000)
        self.assertIsNone(exits.centipawns(None))


class Reach(unittest.TestCase):
    def test_the_walks_reply_model(self):
        moves = {"a": 0, "b": -20, "c": -200}
        # c lies more than 5 temperatures below the best: never played.
        self.assertEqual(exits.reply_share(moves, "c"), 0.0)
        self.assertAlmostEqual(exits.reply_share(moves, "a"), 1 / (1 + math.exp(-1)))
        self.assertEqual(exits.reply_share(moves, "d"), 0.0)

    def test_reach_along_a_path(self):
        found = exits.find_exit(game(GAME), "tree", pgn.is_tree_answer, pgn.parse_comment)
        tree = {}
        board = chess.Board()
        board.push_uci("e2e4")
        tree[board.fen()] = shown(e7e5=-20, c7c5=-20)
        board.push_uci("e7e5")
        board.push_uci("g1f3")
        tree[board.fen()] = shown(b8c6=-25, g8f6=-25, d7d6=-45)
        share = exits.reach(found.path, lambda b: tree.get(b.fen()))
        expected = 0.5 * (1 / (2 + math.exp(-1)))
        self.assertAlmostEqual(share, expected)
        del tree[board.fen()]
        self.assertIsNone(exits.reach(found.path, lambda b: tree.get(b.fen())), "a reply never valued on the way")


if __name__ == "__main__":
    unittest.main()
