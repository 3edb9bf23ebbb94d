"""lab.matches without engines: openings, fastchess's command line, python-chess's runner on stub engines, match plans
cut into chunks, and fastchess summaries read back and pooled (the logs are two chunks of docs/strength/one-growth's
match A; the pooled figures are those scripts/match-pool printed for them)."""

import os
import tempfile
import types
import unittest
from pathlib import Path

import chess
import chess.engine

from lab import matches

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class Openings(unittest.TestCase):
    def test_the_one_opening_set(self):
        openings = matches.load_openings(matches.DEFAULT_OPENINGS)
        self.assertEqual(len(openings), 20)
        first = openings[0]()
        self.assertEqual(first.epd(), "r1bqkbnr/1ppp1ppp/p1n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R w KQkq -")
        self.assertTrue(all(opening().is_valid() for opening in openings))

    def test_move_lines_and_pgn(self):
        with tempfile.TemporaryDirectory() as tmp:
            lines = Path(tmp) / "lines.txt"
            lines.write_text("# a comment\ne2e4 e7e5 g1f3 b8c6 f1b5 a7a6\n\nd2d4 d7d5\n")
            boards = [opening() for opening in matches.load_openings(lines)]
            self.assertEqual(boards[0].epd(), matches.load_openings(matches.DEFAULT_OPENINGS)[0]().epd())
            self.assertEqual(len(boards), 2)
            epd = Path(tmp) / "lines.epd"
            matches.moves_to_epd(lines, epd)
            self.assertEqual(epd.read_text().splitlines()[1], boards[1].fen())
        games = matches.load_openings(FIXTURES / "deepen16-first-pair.pgn")
        self.assertEqual(len(games), 2)
        self.assertGreater(games[0]().ply(), 100)

    def test_book_format(self):
        self.assertEqual(matches.book_format("a/b.EPD"), "epd")
        self.assertEqual(matches.book_format("b.pgn"), "pgn")
        self.assertEqual(matches.book_format("b.txt"), "moves")

    def test_epd_with_counters(self):
        board = matches.epd_board("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
        self.assertEqual(board.fullmove_number, 1)
        self.assertEqual(matches.epd_board('8/8/8/8/8/8/8/K1k5 w - - id "x";').king(chess.WHITE), chess.A1)


class Options(unittest.TestCase):
    def test_parse_options(self):
        self.assertEqual(matches.parse_options(["Hash=16", "Ponder=false", "Name=x=y", "Contempt=-5"]),
                         {"Hash": 16, "Ponder": False, "Name": "x=y", "Contempt": -5})

    def test_fastchess_engine(self):
        words = matches.fastchess_engine("/bin/true --db '/tmp/a tree'", "deeptree", ["Threads=1"], 0)
        self.assertEqual(words, ["-engine", "cmd=/bin/true", "name=deeptree", 'args=--db "/tmp/a tree"',
                                 "option.Threads=1"])
        self.assertIn("nodes=1000", matches.fastchess_engine("/bin/true", "x", None, 1000))
        self.assertEqual(matches.fastchess_arg("it's"), '"it\'s"')
        with self.assertRaises(SystemExit):
            matches.fastchess_arg("""both ' and " """)


class StubEngine:
    """Plays the first legal move in UCI order and reports depth 7 and +0.12 for the side to move."""

    def play(self, board, limit, game=None, ponder=False, info=None):
        move = min(board.legal_moves, key=lambda m: m.uci())
        return chess.engine.PlayResult(move, None, info={
            "depth": 7, "score": chess.engine.PovScore(chess.engine.Cp(12), board.turn)})


class Runner(unittest.TestCase):
    def test_play_game_on_stub_engines(self):
        engines = [("one", StubEngine()), ("two", StubEngine())]
        args = types.SimpleNamespace(base=10.0, inc=0.1, nodes=0, ponder=False)
        record = {name: {"moves": 0, "losses": 0, "least": float("inf")} for name, _ in engines}
        game, result = matches.play_game(engines, chess.Board(), 0, args, record)
        self.assertIn(result, ("1-0", "0-1", "1/2-1/2"))
        self.assertEqual((game.headers["White"], game.headers["Black"], game.headers["Result"]),
                         ("one", "two", result))
        moves = list(game.mainline())
        self.assertEqual(record["one"]["moves"] + record["two"]["moves"], len(moves))
        self.assertRegex(moves[0].comment, r"^\+0\.12/7 \d+\.\d{3}s, search$")
        self.assertLess(record["one"]["least"], 10.1)

    def test_move_comment(self):
        mate = chess.engine.PovScore(chess.engine.Mate(-3), chess.WHITE)
        self.assertEqual(matches.move_comment({"score": mate, "depth": 20}, 0.25), "-M3/20 0.250s, search")
        self.assertEqual(matches.move_comment({}, 0.0), "0.00/0 0.000s, search")
        # deeptree's answer from its tree: its `info string tree move: ...` is the move's last info string.
        said = {"depth": 18, "string": "tree move: combined depth 18 (engine 16 + software 2) against 14.2 for a search"}
        self.assertEqual(matches.move_comment(said, 0.012), "0.00/18 0.012s, tree")
        self.assertEqual(matches.move_comment({"depth": 9, "string": "NNUE evaluation using nn.nnue"}, 0.1),
                         "0.00/9 0.100s, search")


class Plans(unittest.TestCase):
    PLAN = [{"name": "deeptree", "tc": "2+0.02", "games": 20, "seed": 100, "priority": 2, "tree": "/t",
             "options": ["StoreSearches=true"]},
            {"name": "control", "tc": "2+0.02", "games": 16, "seed": 100, "priority": 1}]

    def test_chunk_queue(self):
        queue = matches.chunk_queue([dict(m) for m in self.PLAN], matches.chunk_games(7))
        self.assertEqual([(c.match["name"], c.index, c.games) for c in queue],
                         [("control", 0, 8), ("control", 1, 8), ("deeptree", 0, 8), ("deeptree", 1, 8),
                          ("deeptree", 2, 4)])

    def test_check_plan(self):
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "tree"
            tree.mkdir()
            (tree / "data.mdb").write_bytes(b"")
            deeptree = Path(tmp) / "deeptree"
            deeptree.write_bytes(b"")
            plan = [dict(self.PLAN[0], tree=str(tree)), dict(self.PLAN[1])]
            checked = matches.check_plan(plan, deeptree)
            self.assertEqual(checked[1]["book"], str(matches.DEFAULT_OPENINGS))
            with self.assertRaises(ValueError):
                matches.check_plan([dict(self.PLAN[0], tree=os.path.join(tmp, "none"))], deeptree)
            with self.assertRaises(ValueError):
                matches.check_plan([dict(self.PLAN[1]), dict(self.PLAN[1])], deeptree)
            for wrong in ({"runner": "cutechess"}, {"runner": "fastchess", "ponder": True}):
                with self.assertRaises(ValueError):
                    matches.check_plan([dict(self.PLAN[1], **wrong)], deeptree)
            # A control of the seed of a pondering match must be played on the same runner.
            ponder = dict(self.PLAN[0], tree=str(tree), ponder=True)
            with self.assertRaises(ValueError):
                matches.check_plan([dict(ponder), dict(self.PLAN[1])], deeptree)
            matches.check_plan([dict(ponder), dict(self.PLAN[1], ponder=True)], deeptree)
            matches.check_plan([dict(ponder), dict(self.PLAN[1], runner="python")], deeptree)
        self.assertFalse(matches.python_runner(self.PLAN[1]))
        self.assertTrue(matches.python_runner(dict(self.PLAN[1], ponder=True)))
        self.assertTrue(matches.python_runner(dict(self.PLAN[1], runner="python")))

    def test_chunk_arguments(self):
        match = dict(self.PLAN[0], book="book.epd")
        words = matches.chunk_arguments(match, 3, 8, "c.pgn", "/dt", "/sf", tree="/copy")
        self.assertEqual(words[:2], ["--engine1", "/dt --db /copy"])
        self.assertIn("StoreSearches=true", words)
        self.assertEqual(words[words.index("--seed") + 1], "103")
        control = matches.chunk_arguments(dict(self.PLAN[1], book="book.epd"), 0, 8, "c.pgn", "/dt", "/sf")
        self.assertEqual(control[:4], ["--engine1", "/sf", "--name1", "stockfish-a"])
        head_to_head = matches.chunk_arguments(dict(match, opponent_tree="/o", opponent="even"), 0, 8, "c.pgn",
                                               "/dt", "/sf", tree="/copy", opponent="/ocopy")
        self.assertIn("/dt --db /ocopy", head_to_head)
        self.assertIn("even", head_to_head)
        self.assertNotIn("--ponder", words)
        self.assertEqual(matches.chunk_arguments(dict(match, ponder=True), 0, 8, "c.pgn", "/dt", "/sf",
                                                 tree="/copy")[-1], "--ponder")

    def test_estimate_and_done(self):
        self.assertAlmostEqual(matches.estimate_seconds("2+0.02", 8), 59.2)
        self.assertTrue(matches.chunk_done(FIXTURES / "fastchess-decisive.log", 8))
        self.assertFalse(matches.chunk_done(FIXTURES / "fastchess-decisive.log", 10))
        self.assertFalse(matches.chunk_done(FIXTURES / "missing.log", 8))


class Summaries(unittest.TestCase):
    def test_read_and_pool(self):
        summaries = [matches.read_summary((FIXTURES / name).read_text())
                     for name in ("fastchess-all-draws.log", "fastchess-decisive.log")]
        self.assertEqual(summaries[1], matches.Summary(1, 2, 5, [1, 0, 2, 1, 0]))
        self.assertEqual(matches.pooled_lines(matches.pool_summaries(summaries)), [
            "Games: 16, Wins: 1, Losses: 2, Draws: 13",
            "Ptnml(0-2): [1, 0, 6, 1, 0]",
            "Elo: -21.74 +/- 96.80 (95%: -120.27 to 73.32)",
            "LOS: 32.53 %",
        ])
        self.assertIsNone(matches.read_summary("no summary here"))

    def test_draw_rate_and_even_pairs(self):
        # 13 draws of 16 games (81.25 %), 6 of 8 pairs 1-1; Wilson's interval of 13 in 16: 57.0 % to 93.4 %.
        summaries = [matches.read_summary((FIXTURES / name).read_text())
                     for name in ("fastchess-all-draws.log", "fastchess-decisive.log")]
        self.assertEqual(matches.draw_lines(matches.pool_summaries(summaries)), [
            "Games: 16, draws: 13, draw rate 81.2 % (95 %: 57.0 to 93.4)",
            "Ptnml(0-2): [1, 0, 6, 1, 0]: 6 of 8 pairs 1-1, 75.0 % (95 %: 40.9 to 92.9)",
        ])

    def test_python_runner_results_read_back(self):
        # Pairs: win+draw (3 half points), loss+loss (0), draw+draw (2), win+win (4); a last game unpaired.
        lines = matches.result_lines([1, 0.5, 0, 0, 0.5, 0.5, 1, 1, 0])
        self.assertEqual(lines, ["Games: 9, Wins: 3, Losses: 3, Draws: 3", "Ptnml(0-2): [1, 0, 1, 1, 1]"])
        self.assertEqual(matches.read_summary("\n".join(lines)), matches.Summary(3, 3, 3, [1, 0, 1, 1, 1]))
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "chunk.log"
            log.write_text("\n".join(matches.result_lines([1, 0] * 4)))
            self.assertTrue(matches.chunk_done(log, 8))
            self.assertFalse(matches.chunk_done(log, 10))

    def test_clocks_read_and_pooled(self):
        # Two runs of scripts/match with pondering: moves and losses add up, the least time left is the lesser, the
        # thinks after ponderhit give their count, the runs' medians (median and range), the larger p99 and longest.
        first = ("clock of deeptree: 444 moves, 0 time losses, least time left 0.013 s\n"
                 "clock of stockfish: 440 moves, 1 time losses, least time left 0.024 s\n"
                 "moves after ponderhit of deeptree: 303, median 0.019 s, p99 0.228 s, max 0.290 s\n"
                 "moves after ponderhit of stockfish: 286, median 0.017 s, p99 0.240 s, max 0.334 s\n")
        second = ("clock of deeptree: 10 moves, 2 time losses, least time left 0.500 s\n"
                  "clock of stockfish: 12 moves, 0 time losses, least time left 0.005 s\n"
                  "moves after ponderhit of deeptree: 7, median 0.030 s, p99 0.100 s, max 0.400 s\n"
                  "moves after ponderhit of stockfish: none\n")
        runs = [matches.read_clocks(first), matches.read_clocks(second)]
        self.assertEqual(runs[0]["deeptree"], matches.Clock(444, 0, 0.013, 303, [0.019], 0.228, 0.29))
        self.assertEqual(runs[1]["stockfish"], matches.Clock(12, 0, 0.005, 0, [], 0.0, 0.0))
        self.assertEqual(matches.clock_lines(matches.pool_clocks(runs)), [
            "clock of deeptree: 454 moves, 2 time losses, least time left 0.013 s",
            "clock of stockfish: 452 moves, 1 time losses, least time left 0.005 s",
            "moves after ponderhit of deeptree: 310 in 2 runs, median of the runs' medians 0.030 s (0.019 to 0.030), "
            "largest p99 0.228 s, longest 0.400 s",
            "moves after ponderhit of stockfish: 286 in 1 runs, median of the runs' medians 0.017 s (0.017 to "
            "0.017), largest p99 0.240 s, longest 0.334 s",
        ])
        self.assertEqual(matches.read_clocks("Games: 8, Wins: 1, Losses: 0, Draws: 7"), {})
        no_time = matches.read_clocks("clock of a: 0 moves, 0 time losses, least time left n/a")
        self.assertIsNone(no_time["a"].least)


if __name__ == "__main__":
    unittest.main()
