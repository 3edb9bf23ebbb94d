"""deeptree driven as a UCI engine by python-chess (the client lichess-bot uses).

Usage: python3 tests/python/test_uci.py DEEPTREE_BINARY [INNER_ENGINE]
INNER_ENGINE (default: Stockfish) is the inner engine deeptree is given, any UCI engine (Toga II: /usr/games/toga2).
Prints one line per scenario and a closing 'N passed, N skipped, N failed' line; exits 1 on any failure. A scenario
the inner engine cannot take part in (Chess960 with an engine that has no UCI_Chess960) is skipped, and says why.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import chess
import chess.engine
import chess.pgn

BINARY = sys.argv[1]
INNER = sys.argv[2] if len(sys.argv) > 2 else (shutil.which("stockfish") or "/usr/games/stockfish")
SETTINGS = {"InnerEngine": INNER, "EngineDepth": 6, "MoveDistance": 30, "BackgroundAnalysis": False}
# deeptree's own options: an inner engine's option of the same name is deeptree's to set.
OWN = {"TreePath", "InnerEngine", "EngineDepth", "MoveDistance", "BackgroundAnalysis", "Hash", "Threads", "MultiPV",
       "Ponder", "UCI_AnalyseMode", "UCI_Chess960", "UCI_ShowWDL"}


class Skip(Exception):
    """A scenario the inner engine cannot take part in."""


def inner_options():
    """The options the inner engine declares, as python-chess reads them from the engine itself."""
    inner = chess.engine.SimpleEngine.popen_uci(INNER, timeout=20)
    try:
        return dict(inner.options)
    finally:
        inner.quit()


def deeptree_cli(db, *args):
    out = subprocess.run([BINARY, "--db", db, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def command(db):
    """deeptree's command line for a GUI: with a settings file naming the inner engine, so that its options are
    offered at `uci` (the InnerEngine option, set after `uci`, changes the engine but cannot declare new options)."""
    settings = db.rstrip("/") + ".toml"
    with open(settings, "w") as handle:
        print(f"engine = {json.dumps(INNER)}", file=handle)
    return [BINARY, "--db", db, "--config", settings]


def open_engine(db):
    engine = chess.engine.SimpleEngine.popen_uci(command(db), timeout=20)
    engine.configure(SETTINGS)
    return engine


def test_handshake_and_options(db):
    engine = chess.engine.SimpleEngine.popen_uci(command(db), timeout=20)
    try:
        assert engine.id["name"].startswith("deeptree"), engine.id
        for name in ["TreePath", "InnerEngine", "EngineDepth", "MoveDistance", "BackgroundAnalysis", "Hash",
                     "Threads", "MultiPV", "Ponder", "UCI_AnalyseMode"]:
            assert name in engine.options, f"option {name} missing"
        # Every option of the inner engine is offered under its own name, and one is accepted; a count of threads
        # under another name (Toga II's "Number of Threads") is not: the threads are deeptree's Threads budget.
        declared = inner_options()
        missing = sorted(name for name in declared
                         if name not in engine.options and name not in OWN and "thread" not in name.lower())
        assert not missing, f"options of {INNER} not offered: {missing}"
        threads = [name for name in engine.options if "thread" in name.lower() and name != "Threads"]
        assert not threads, f"another count of threads offered: {threads}"
        spins = [o for name, o in declared.items() if o.type == "spin" and name not in OWN]
        assert spins, f"{INNER} declares no spin option: {sorted(declared)}"
        option = next((o for o in spins if o.name == "Move Overhead"), spins[0])
        engine.configure({option.name: option.default, **SETTINGS})
        assert engine.options["TreePath"].default == db
        engine.ping()
    finally:
        engine.quit()


def test_play_from_the_tree(db):
    report = deeptree_cli(db, "analyze", "--engine", INNER, "--engine-depth", "6", "--move-distance", "30",
                          "--max-depth", "2", "--workers", "2", "--json")
    assert report["settled_depth"] == 2, report
    tree = deeptree_cli(db, "show", "--json", "--depth", "1")
    best = tree["moves"][0]["uci"]
    engine = open_engine(db)
    try:
        # The tree knows depth 8 (engine 6 + software 2): asked for depth 8, it answers without a search.
        result = engine.play(chess.Board(), chess.engine.Limit(depth=8), info=chess.engine.INFO_ALL)
        assert result.move.uci() == best, (result.move, best)
        assert "tree move" in result.info.get("string", ""), result.info
        assert result.info.get("depth") == 8, result.info  # combined depth: software 2 + engine 6
        assert result.info["pv"][0] == result.move, result.info
        assert "score" in result.info
        # Asked for more than it knows, it lets the inner engine search.
        result = engine.play(chess.Board(), chess.engine.Limit(depth=9), info=chess.engine.INFO_ALL)
        assert "tree move" not in result.info.get("string", ""), result.info
        assert result.info.get("depth") == 9, result.info
    finally:
        engine.quit()


def assert_win_rates(info, where):
    """A scored line carries win rates that add up and agree with the score's sign."""
    assert "wdl" in info, f"{where}: no wdl in {info}"
    wdl, score = info["wdl"].relative, info["score"].relative
    assert wdl.total() == 1000, f"{where}: {wdl}"
    if score.score(mate_score=100000) > 60:
        assert wdl.wins > wdl.losses, f"{where}: {score} with {wdl}"
    if score.score(mate_score=100000) < -60:
        assert wdl.wins < wdl.losses, f"{where}: {score} with {wdl}"


def test_win_rates_on_tree_and_relayed_lines(db):
    deeptree_cli(db, "analyze", "--engine", INNER, "--engine-depth", "6", "--move-distance", "30", "--max-depth", "2",
                 "--workers", "2", "--json")
    engine = open_engine(db)
    try:
        # deeptree declares the option itself, whatever its inner engine; off by default, as Stockfish's.
        assert "UCI_ShowWDL" in engine.options and engine.options["UCI_ShowWDL"].default is False, engine.options
        engine.configure({"UCI_ShowWDL": True})
        # The tree's answer: its line scored by the tree, with the model's rates.
        result = engine.play(chess.Board(), chess.engine.Limit(depth=8), info=chess.engine.INFO_ALL)
        assert "tree move" in result.info.get("string", ""), result.info
        assert_win_rates(result.info, "tree answer")
        # The tree's lines while it grows (`go infinite`): every scored line.
        scored = 0
        with engine.analysis(chess.Board(), multipv=2) as analysis:
            deadline = time.monotonic() + 4
            for info in analysis:
                if "score" in info:
                    assert_win_rates(info, "tree growth")
                    scored += 1
                if time.monotonic() > deadline or scored >= 4:
                    break
            analysis.stop()
            analysis.wait()
        assert scored, "no scored line while the tree grew"
        # A position the tree does not know: the inner engine's lines, relayed (its own rates where it gives them).
        board = chess.Board("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4")
        relayed = 0
        with engine.analysis(board, chess.engine.Limit(depth=8)) as analysis:
            for info in analysis:
                if "score" in info:
                    assert_win_rates(info, "relayed")
                    relayed += 1
        assert relayed, "no relayed line"
        # Off: no line carries them.
        engine.configure({"UCI_ShowWDL": False})
        with engine.analysis(board, chess.engine.Limit(depth=8)) as analysis:
            for info in analysis:
                assert "wdl" not in info, info
        result = engine.play(chess.Board(), chess.engine.Limit(depth=8), info=chess.engine.INFO_ALL)
        assert "wdl" not in result.info, result.info
    finally:
        engine.quit()


def test_fallback_to_the_inner_engine_stores_what_it_learned(db):
    board = chess.Board("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4")
    engine = open_engine(db)
    try:
        result = engine.play(board, chess.engine.Limit(depth=7), info=chess.engine.INFO_ALL)
        assert result.move in board.legal_moves
        assert result.info.get("depth") == 7, result.info
    finally:
        engine.quit()
    shown = deeptree_cli(db, "show", "--json", "--fen", board.fen(), "--depth", "1")
    assert [m["uci"] for m in shown["moves"]] == [result.move.uci()], shown


def test_infinite_analysis_streams_and_stops(db):
    engine = open_engine(db)
    try:
        board = chess.Board()
        board.push_uci("d2d4")
        with engine.analysis(board, multipv=3) as analysis:
            seen = []
            deadline = time.monotonic() + 6
            for info in analysis:
                if "pv" in info and "multipv" in info:
                    seen.append(info)
                if time.monotonic() > deadline or len({i["multipv"] for i in seen}) >= 2 and len(seen) >= 6:
                    break
            assert seen, "info lines while the tree grows"
            assert all(info["pv"][0] in board.legal_moves for info in seen)
            assert max(info["multipv"] for info in seen) >= 2, "several candidate moves"
            analysis.stop()
            best = analysis.wait()
        assert best.move in board.legal_moves
    finally:
        engine.quit()


def test_pondering(db):
    engine = open_engine(db)
    try:
        board = chess.Board()
        for _ in range(4):
            result = engine.play(board, chess.engine.Limit(white_clock=30, black_clock=30, white_inc=0.1,
                                                           black_inc=0.1), ponder=True)
            assert result.move in board.legal_moves
            board.push(result.move)
            # The opponent plays the expected move (a ponderhit) or another one (a stop).
            reply = result.ponder if result.ponder in board.legal_moves else next(iter(board.legal_moves))
            board.push(reply)
        engine.ping()
    finally:
        engine.quit()


def test_bad_input_is_answered_and_changes_nothing(db):
    # An import of one position creates the store (stats only reads, and refuses a path with no store; an import
    # that reads nothing exits 1 and creates none).
    one = os.path.join(db, "one.epd")
    with open(one, "w") as f:
        f.write("4k3/8/8/8/8/8/4P3/4K3 w - -\n")
    deeptree_cli(db, "import", "epd", one, "--json")
    before = deeptree_cli(db, "stats", "--json")
    lines = [
        "hello there", "position fen not-a-fen", "position startpos moves e2e5", "go depth x",
        "setoption name Threads value 0", "setoption name EngineDepth value -3", "setoption name Nope value 1",
        "setoption name Ponder value maybe", "position fen 8/8/8/8/8/8/8/8 w - - 0 1", "go",
        "position", "go wtime", "\x00\x01garbage", "isready",
    ]
    proc = subprocess.run([BINARY, "--db", db], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=30)
    out = proc.stdout.splitlines()
    errors = [line for line in out if line.startswith("info string error:")]
    assert len(errors) >= 10, out
    assert out[-1] == "readyok", out
    assert "bestmove 0000" in out, out
    assert proc.returncode == 0, proc.stderr
    after = deeptree_cli(db, "stats", "--json")
    assert (after["positions"], after["edges"]) == (before["positions"], before["edges"]), (before, after)


def test_missing_inner_engine_is_reported(db):
    engine = chess.engine.SimpleEngine.popen_uci([BINARY, "--db", db], timeout=20)
    try:
        engine.configure({"InnerEngine": "/nonexistent/engine", "BackgroundAnalysis": False})
        board = chess.Board("8/8/8/4k3/8/8/4P3/4K3 w - - 0 1")
        result = engine.play(board, chess.engine.Limit(depth=5))
        assert result.move in board.legal_moves, "the game goes on"
    finally:
        engine.quit()


def test_fast_game_never_loses_on_time(db):
    engine = open_engine(db)
    try:
        board = chess.Board()
        clocks = {chess.WHITE: 3.0, chess.BLACK: 3.0}
        inc = 0.05
        while not board.is_game_over() and board.ply() < 60:
            started = time.monotonic()
            result = engine.play(board, chess.engine.Limit(white_clock=clocks[chess.WHITE],
                                                           black_clock=clocks[chess.BLACK],
                                                           white_inc=inc, black_inc=inc))
            spent = time.monotonic() - started
            clocks[board.turn] -= spent
            assert clocks[board.turn] > 0, f"lost on time at ply {board.ply()}"
            clocks[board.turn] += inc
            board.push(result.move)
    finally:
        engine.quit()


def test_fast_pondering_game_never_loses_on_time(db):
    # deeptree plays White with pondering on a 2 s + 0.02 s clock, with the engine depth of a grown tree (the depth
    # a growth in ponder time searches at); Black replies after a short think with the move deeptree expected when
    # it is legal (a ponderhit) and with another one every fourth move (a stop). Its clock runs from Black's move to
    # its bestmove, as a GUI's does.
    engine = open_engine(db)
    try:
        engine.configure({"EngineDepth": 14})
        board = chess.Board()
        clock, inc = 2.0, 0.02
        for ply in range(30):
            started = time.monotonic()
            result = engine.play(board, chess.engine.Limit(white_clock=clock, black_clock=2.0, white_inc=inc,
                                                           black_inc=inc), ponder=True)
            clock -= time.monotonic() - started
            assert clock > 0, f"lost on time at move {ply + 1}"
            clock += inc
            board.push(result.move)
            if board.is_game_over():
                break
            time.sleep(0.1)
            expected = result.ponder if result.ponder in board.legal_moves and ply % 4 != 3 else None
            board.push(expected or next(iter(board.legal_moves)))
            if board.is_game_over():
                break
    finally:
        engine.quit()


CHESS960_FEN = "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"


def test_chess960_tree_and_game(db):
    """A Chess960 root: the tree is grown with the inner engine in Chess960 mode, answers from it, and a game with
    castling (king takes rook, as python-chess writes it for Chess960) goes on with legal moves."""
    if "UCI_Chess960" not in inner_options():
        raise Skip(f"{INNER} has no UCI_Chess960 option: it plays no Chess960")
    report = deeptree_cli(db, "analyze", "--fen", CHESS960_FEN, "--engine", INNER, "--engine-depth", "6",
                          "--move-distance", "30", "--max-depth", "1", "--json")
    assert report["settled_depth"] == 1, report
    shown = deeptree_cli(db, "show", "--json", "--fen", CHESS960_FEN, "--depth", "1")
    board = chess.Board(CHESS960_FEN, chess960=True)
    assert shown["moves"] and all(chess.Move.from_uci(m["uci"]) in board.legal_moves for m in shown["moves"]), shown
    engine = open_engine(db)
    try:
        # The tree knows this root to depth 7 (engine 6 + software 1): asked for depth 7, it answers.
        result = engine.play(board, chess.engine.Limit(depth=7), info=chess.engine.INFO_ALL)
        assert "tree move" in result.info.get("string", ""), result.info
        assert result.move.uci() == shown["moves"][0]["uci"], (result.move, shown["moves"][0])
        # A game from a position where both sides may castle on either wing.
        board = chess.Board("1r2k1r1/pppppppp/8/8/8/8/PPPPPPPP/1R2K1R1 w GBgb - 0 1", chess960=True)
        castled = False
        for _ in range(12):
            castles = [m for m in board.legal_moves if board.is_castling(m)]
            move = castles[0] if castles else engine.play(board, chess.engine.Limit(depth=5)).move
            assert move in board.legal_moves, (move, board.fen())
            castled = castled or board.is_castling(move)
            board.push(move)
            if board.is_game_over():
                break
        assert castled, "the game had castling in it"
        result = engine.play(board, chess.engine.Limit(depth=5), info=chess.engine.INFO_ALL)
        assert result.move in board.legal_moves
    finally:
        engine.quit()
    # The game with its castling, imported as a Chess960 PGN, is one line of the tree.
    game = chess.pgn.Game.from_board(board)
    pgn_in = os.path.join(db, "game960.pgn")
    with open(pgn_in, "w") as handle:
        print(game, file=handle)
    deeptree_cli(db, "import", "pgn", pgn_in, "--json")
    line = " ".join(m.uci() for m in board.move_stack)
    shown = deeptree_cli(db, "show", "--json", "--fen", board.root().fen(), "--moves", line, "--chess960",
                         "--depth", "1")
    assert shown["fen"].split()[0] == board.fen().split()[0], (shown["fen"], board.fen())
    # The export of a Chess960 root reads back as a Chess960 game whose moves are legal.
    pgn_out = os.path.join(db, "tree960.pgn")
    subprocess.run([BINARY, "--db", db, "export", "pgn", pgn_out, "--fen", CHESS960_FEN, "--depth", "2"], check=True,
                   capture_output=True)
    with open(pgn_out) as handle:
        exported = chess.pgn.read_game(handle)
    assert exported.headers.get("Variant") == "Chess960", exported.headers
    assert exported.board().chess960 and not exported.errors, exported.errors
    assert len(list(exported.mainline_moves())) >= 1


def main():
    tests = [(name, fn) for name, fn in sorted(globals().items()) if name.startswith("test_")]
    only = os.environ.get("DEEPTREE_UCI_TEST")
    passed = skipped = failed = 0
    print(f"inner engine: {INNER}", flush=True)
    for name, fn in tests:
        if only and only not in name:
            continue
        db = tempfile.mkdtemp(prefix="deeptree-uci-")
        started = time.monotonic()
        try:
            fn(db)
            passed += 1
            print(f"ok   {name} ({time.monotonic() - started:.1f} s)", flush=True)
        except Skip as why:
            skipped += 1
            print(f"skip {name}: {why}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
        finally:
            shutil.rmtree(db, ignore_errors=True)
            if os.path.exists(db + ".toml"):
                os.remove(db + ".toml")
    print(f"{passed} passed, {skipped} skipped, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
