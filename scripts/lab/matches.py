"""Running engines and matches: openings, fastchess's command line, python-chess's own runner, match plans cut into
chunks, and the summaries fastchess prints (read back and pooled).

scripts/match plays one match (run_fastchess where FASTCHESS names a fastchess binary, else run_python);
scripts/match-chunks plays the matches of a plan as chunks of a few games (Chunk, chunk_queue, play_chunk), each
chunk one scripts/match; scripts/match-pool pools the chunks' summaries (read_summary, pool_summaries).
"""

import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from pathlib import Path

try:
    import chess
    import chess.engine
    import chess.pgn
except ImportError:  # plans, chunks and summaries work without python-chess
    chess = None

from . import pgn, stats

SCRIPTS = Path(__file__).resolve().parent.parent
ROOT = SCRIPTS.parent
# The one opening set of the repository: 20 balanced openings, each played with both colours.
DEFAULT_OPENINGS = SCRIPTS / "openings.epd"
SUMMARY_PREFIXES = ("Elo:", "LOS:", "Games:", "Ptnml", "Player:", "  Timeouts:", "  Crashed:")
GAMES = re.compile(r"Games: (\d+), Wins: (\d+), Losses: (\d+), Draws: (\d+)")
PTNML = re.compile(r"Ptnml\(0-2\): \[(\d+), (\d+), (\d+), (\d+), (\d+)\]")
# scripts/match's clock lines (python-chess's runner): each side's moves, time losses and least time left, and with
# pondering its thinks after `ponderhit`.
CLOCK = re.compile(r"^clock of (.+): (\d+) moves, (\d+) time losses, least time left (n/a|[\d.]+ s)$", re.M)
AFTER_PONDERHIT = re.compile(
    r"^moves after ponderhit of (.+): (\d+), median ([\d.]+) s, p99 ([\d.]+) s, max ([\d.]+) s$", re.M)


def book_format(path):
    suffix = Path(path).suffix.lower()
    return suffix[1:] if suffix in (".epd", ".pgn") else "moves"


def epd_board(line):
    """The position of an EPD line: four FEN fields, then either the two move counters or EPD operations."""
    parts = line.split()
    if len(parts) >= 6 and parts[4].isdigit() and parts[5].isdigit():
        return chess.Board(" ".join(parts[:6]))
    return chess.Board.from_epd(line)[0]


def load_openings(path):
    """Openings as zero-argument functions returning the start board (parsed only when played)."""
    kind = book_format(path)
    if kind == "epd":
        lines = [line.strip() for line in Path(path).read_text().splitlines()]
        return [lambda line=line: epd_board(line) for line in lines if line and not line.startswith("#")]
    if kind == "pgn":
        with open(path) as handle:
            offsets = []
            while True:
                offset = handle.tell()
                if chess.pgn.read_headers(handle) is None:
                    break
                offsets.append(offset)

        def game_board(offset):
            with open(path) as handle:
                handle.seek(offset)
                return chess.pgn.read_game(handle).end().board()
        return [lambda offset=offset: game_board(offset) for offset in offsets]
    lines = [line.split("#")[0].strip() for line in Path(path).read_text().splitlines()]

    def moves_board(moves):
        board = chess.Board()
        for uci in moves:
            board.push_uci(uci)
        return board
    return [lambda moves=line.split(): moves_board(moves) for line in lines if line]


def parse_options(pairs):
    """NAME=VALUE pairs as python-chess takes them: numbers as int, true and false as bool. python-chess compares
    the options it was given with those it sent before each move and sends `ponderhit` only where none changed: a
    check option given as the text 'false' never equals the False it sent, and the engine would get `stop` and a new
    search after every ponder, even where the opponent played the move it pondered on."""
    options = {}
    for pair in pairs or []:
        name, _, value = pair.partition("=")
        if value.lstrip("-").isdigit():
            options[name] = int(value)
        elif value.lower() in ("true", "false"):
            options[name] = value.lower() == "true"
        else:
            options[name] = value
    return options


def machine():
    """`nproc` and the CPU model of this machine."""
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"nproc {nproc}, CPU {model}"


def move_comment(info, spent):
    """A move's comment as fastchess writes it, `+0.06/14 0.099s`: the score in pawns for the side that moved (or
    M3 / -M3), the depth, and the seconds from `go` to `bestmove` (with pondering: from the opponent's move); then
    `, tree` where the engine's last `info string` of the move said `tree move: ...` (deeptree's answer from its tree),
    else `, search`, so that lab.pgn tells tree answers from searches without the 5 ms rule, which pondering
    breaks."""
    score = info.get("score")
    if score is None:
        text = "0.00"
    else:
        mover = score.relative  # from the side to move before the move: the engine that moved
        if mover.is_mate():
            text = f"M{mover.mate()}" if mover.mate() > 0 else f"-M{-mover.mate()}"
        else:
            text = f"{mover.score() / 100:+.2f}"
    said = str(info.get("string", ""))
    mark = pgn.TREE_MARK if said.startswith("tree move") else pgn.SEARCH_MARK
    return f"{text}/{info.get('depth', 0)} {spent:.3f}s, {mark}"


def play_game(engines, start, white, args, clock_record):
    board = start.copy()
    game = chess.pgn.Game.from_board(board)
    game.headers["White"] = engines[white][0]
    game.headers["Black"] = engines[1 - white][0]
    base, inc = args.base, args.inc
    clocks = {chess.WHITE: base, chess.BLACK: base}
    side_engine = {chess.WHITE: engines[white][1], chess.BLACK: engines[1 - white][1]}
    # A ponder move of the last game is no ponder of this one.
    for name, _ in engines:
        clock_record[name].pop("pondering", None)
    node = game.end()
    result = None
    while result is None:
        if board.is_game_over(claim_draw=True):
            result = board.result(claim_draw=True)
            break
        if board.ply() >= 400:
            result = "1/2-1/2"
            break
        engine = side_engine[board.turn]
        if args.nodes:
            limit = chess.engine.Limit(nodes=args.nodes)
        else:
            limit = chess.engine.Limit(white_clock=clocks[chess.WHITE], black_clock=clocks[chess.BLACK],
                                       white_inc=inc, black_inc=inc)
        mover = engines[white if board.turn == chess.WHITE else 1 - white][0]
        record = clock_record[mover]
        # python-chess sends `ponderhit` where the opponent played the move this engine pondered on (and no option
        # changed: see parse_options).
        hit = args.ponder and board.move_stack and record.get("pondering") == board.move_stack[-1]
        started = time.monotonic()
        played = engine.play(board, limit, game=game, ponder=args.ponder, info=chess.engine.INFO_BASIC |
                             chess.engine.INFO_SCORE)
        spent = time.monotonic() - started
        record["moves"] += 1
        record["pondering"] = played.ponder
        record.setdefault("after_ponderhit", []).extend([spent] if hit else [])
        if not args.nodes:
            clocks[board.turn] -= spent
            record["least"] = min(record["least"], clocks[board.turn])
            if clocks[board.turn] < 0:
                record["losses"] += 1
                result = "0-1" if board.turn == chess.WHITE else "1-0"
                break
            clocks[board.turn] += inc
        if played.move is None or played.move not in board.legal_moves:
            result = "0-1" if board.turn == chess.WHITE else "1-0"
            print(f"illegal or missing move from {engines[white if board.turn else 1 - white][0]}", file=sys.stderr)
            break
        board.push(played.move)
        node = node.add_variation(played.move)
        node.comment = move_comment(played.info, spent)
    game.headers["Result"] = result
    return game, result


def run_python(args, names, book, seed):
    """The games played here through python-chess, one at a time."""
    base, _, inc = args.tc.partition("+")
    args.base, args.inc = float(base), float(inc or 0)
    engines = []
    for name, command, options in [(names[0], args.engine1, args.option1), (names[1], args.engine2, args.option2)]:
        engine = chess.engine.SimpleEngine.popen_uci(shlex.split(command), timeout=60)
        engine.configure(parse_options(options))
        engines.append((name, engine))

    openings = load_openings(book)
    order = list(range(len(openings)))
    if seed is not None:
        random.Random(seed).shuffle(order)
    results = []
    tally = {"win": 0, "draw": 0, "loss": 0}
    clock_record = {name: {"moves": 0, "losses": 0, "least": float("inf")} for name in names}
    pgn_out = open(args.pgn, "w") if args.pgn else None
    pairs = (args.games + 1) // 2
    try:
        for i in range(pairs):
            start = openings[order[i % len(order)]]()
            for white in (0, 1):
                game, result = play_game(engines, start, white, args, clock_record)
                if result == "1/2-1/2":
                    score = 0.5
                else:
                    white_won = result == "1-0"
                    score = 1.0 if white_won == (white == 0) else 0.0
                results.append(score)
                tally["win" if score == 1 else "draw" if score == 0.5 else "loss"] += 1
                if pgn_out:
                    print(game, file=pgn_out, end="\n\n")
                print(f"game {len(results)}: {game.headers['White']} - {game.headers['Black']} {result}", flush=True)
    finally:
        for name, engine in engines:
            try:
                engine.quit()
            except (chess.engine.EngineError, TimeoutError) as error:
                print(f"{name} did not quit cleanly ({error!r}); closed", file=sys.stderr)
                engine.close()
        if pgn_out:
            pgn_out.close()

    estimate = stats.trinomial(results)
    print()
    print("match summary")
    limit = f"{args.nodes} nodes per move" if args.nodes else f"tc {args.tc}"
    print(f"{names[0]} vs {names[1]}: {len(results)} games, {limit}{', both pondering' if args.ponder else ''}")
    print(f"openings: {book} ({'in order' if seed is None else f'random order, seed {seed}'})")
    print(f"machine: {machine()}")
    print(f"runner: python-chess {chess.__version__}")
    print(f"{names[0]} vs {names[1]}: +{tally['win']} ={tally['draw']} -{tally['loss']} "
          f"({sum(results):.1f}/{len(results)}){', both pondering' if args.ponder else ''}")
    print(f"Elo difference {estimate.elo:+.1f}, 95% interval [{estimate.low:+.1f}, {estimate.high:+.1f}]")
    print(f"LOS {100 * estimate.los:.2f} %")
    for name in names:
        record = clock_record[name]
        least = "n/a" if record["least"] == float("inf") else f"{record['least']:.3f} s"
        print(f"clock of {name}: {record['moves']} moves, {record['losses']} time losses, least time left {least}")
    # The result as fastchess states it, so that match chunks played here are read back and pooled alike.
    for line in result_lines(results):
        print(line)
    if args.ponder:
        # The think after `ponderhit`: from the opponent's move to `bestmove`, while the engine's clock runs.
        for name in names:
            times = sorted(clock_record[name].get("after_ponderhit", []))
            if not times:
                print(f"moves after ponderhit of {name}: none")
                continue
            at = lambda p: times[min(len(times) - 1, round((len(times) - 1) * p))]
            print(f"moves after ponderhit of {name}: {len(times)}, median {at(0.5):.3f} s, "
                  f"p99 {at(0.99):.3f} s, max {times[-1]:.3f} s")
    return 0


def result_lines(scores):
    """fastchess's `Games:` and `Ptnml(0-2):` lines for the first engine's scores (1, 0.5 or 0 a game), in the order
    played: games 2k and 2k+1 are one opening with both colours, a pair; a pair's score in half points (0 to 4) is
    its place in the pentanomial counts. A last game without its pair is left out of the pairs."""
    wins = sum(1 for s in scores if s == 1)
    losses = sum(1 for s in scores if s == 0)
    ptnml = [0] * 5
    for first, second in zip(scores[0::2], scores[1::2]):
        ptnml[round(2 * (first + second))] += 1
    return [f"Games: {len(scores)}, Wins: {wins}, Losses: {losses}, Draws: {len(scores) - wins - losses}",
            f"Ptnml(0-2): {ptnml}"]


def fastchess_arg(text):
    """One argument as fastchess's args= splitter reads it: split on spaces, quotes group, no escapes."""
    if not text:
        raise SystemExit("an empty engine argument cannot be passed to fastchess")
    if not any(c in text for c in " \t'\""):
        return text
    for quote in ('"', "'"):
        if quote not in text:
            return quote + text + quote
    raise SystemExit(f"engine argument with both quote characters cannot be passed to fastchess: {text}")


def fastchess_engine(command, name, options, nodes):
    words = shlex.split(command)
    cmd = words[0]
    if "/" in cmd:
        cmd = os.path.abspath(cmd)
    else:
        cmd = shutil.which(cmd) or cmd
    out = ["-engine", f"cmd={cmd}", f"name={name}"]
    if len(words) > 1:
        out.append("args=" + " ".join(fastchess_arg(word) for word in words[1:]))
    for pair in options or []:
        option, _, value = pair.partition("=")
        out.append(f"option.{option}={value}")
    if nodes:
        out.append(f"nodes={nodes}")
    return out


def moves_to_epd(source, target):
    """A file of UCI move lines (from the start position) as full FENs, one a line."""
    with open(target, "w") as out:
        for start in load_openings(source):
            print(start().fen(), file=out)


def run_fastchess(args, names, book, seed, fastchess):
    """The games played by fastchess; its summary lines are printed again at the end."""
    version = subprocess.run([fastchess, "-version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="match-") as tmp:
        kind = book_format(book)
        book_file = os.path.abspath(book)
        if kind == "moves":
            book_file = os.path.join(tmp, Path(book).stem + ".epd")
            moves_to_epd(book, book_file)
            kind = "epd"
        command = [fastchess]
        command += fastchess_engine(args.engine1, names[0], args.option1, args.nodes)
        command += fastchess_engine(args.engine2, names[1], args.option2, args.nodes)
        command += ["-each", "proto=uci"] + ([] if args.nodes else [f"tc={args.tc}"])
        command += ["-openings", f"file={book_file}", f"format={kind}",
                    f"order={'sequential' if seed is None else 'random'}"]
        if seed is not None:
            command += ["-srand", str(seed)]
        command += ["-rounds", str((args.games + 1) // 2), "-games", "2", "-repeat",
                    "-concurrency", str(args.concurrency), "-recover", "-maxmoves", "200",
                    "-config", f"outname={os.path.join(tmp, 'config.json')}"]
        if args.pgn:
            command += ["-pgnout", f"file={os.path.abspath(args.pgn)}", "append=false", "timeleft=true"]
        print(shlex.join(command), flush=True)

        lines = []
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        while True:
            try:
                for line in process.stdout:
                    print(line, end="", flush=True)
                    lines.append(line.rstrip("\n"))
                break
            except KeyboardInterrupt:  # fastchess stops on SIGINT and still prints its results
                process.send_signal(signal.SIGINT)
        rc = process.wait()

    starts = [i for i, line in enumerate(lines) if line.startswith("Results of ")]
    summary = []
    if starts:
        summary.append(lines[starts[-1]])
        summary += [line for line in lines[starts[-1] + 1:] if line.startswith(SUMMARY_PREFIXES)]
    limit = f"{args.nodes} nodes per move" if args.nodes else f"tc {args.tc}"
    order = "in order" if seed is None else f"random order, seed {seed}"
    print()
    print("match summary")
    print(f"{names[0]} vs {names[1]}: {args.games} games, {limit}, concurrency {args.concurrency}")
    print(f"openings: {book} ({order})")
    print(f"machine: {machine()}")
    print(f"runner: {version or fastchess}")
    for line in summary or ["(fastchess printed no results)"]:
        print(line)
    return rc




# Match plans and their chunks (scripts/match-chunks).

Chunk = namedtuple("Chunk", "priority index order match games")
Chunk.__doc__ = "One chunk of a plan's match: its priority, its number in the match, the match's place, the match, games."


def estimate_seconds(tc, games):
    """A generous length of `games` games at `tc` (seconds+increment): both clocks spent over 60 moves a side."""
    base, _, inc = tc.partition("+")
    per_game = 2 * (float(base) + 60 * float(inc or 0)) + 1.0
    return games * per_game


def chunk_done(log, games):
    """Whether a chunk's log already holds its whole result (a summary of at least `games` games)."""
    log = Path(log)
    if not log.is_file():
        return False
    found = GAMES.findall(log.read_text(errors="replace"))
    return bool(found) and int(found[-1][0]) >= games


def check_plan(matches, deeptree):
    """The plan's matches with their defaults (book, priority); raises ValueError on what cannot be played."""
    names = [m["name"] for m in matches]
    if len(set(names)) != len(names):
        raise ValueError("two matches of the plan have one name")
    for match in matches:
        match.setdefault("book", str(DEFAULT_OPENINGS))
        match.setdefault("priority", 1)
        if match.get("tree") and not (Path(match["tree"]) / "data.mdb").is_file():
            raise ValueError(f"{match['name']}: no tree at {match['tree']}")
        if match.get("opponent_tree") and not match.get("tree"):
            raise ValueError(f"{match['name']}: an opponent_tree needs a tree for the first player")
        if match.get("opponent_tree") and not (Path(match["opponent_tree"]) / "data.mdb").is_file():
            raise ValueError(f"{match['name']}: no tree at {match['opponent_tree']}")
        if match.get("runner", "fastchess") not in ("fastchess", "python"):
            raise ValueError(f"{match['name']}: runner is fastchess or python, not {match['runner']}")
        if match.get("ponder") and match.get("runner") == "fastchess":
            raise ValueError(f"{match['name']}: fastchess does not ponder: a pondering match runs on python")
        same_seed = [m for m in matches if m is not match and m.get("seed") == match.get("seed")]
        if any(python_runner(m) != python_runner(match) for m in same_seed):
            # fastchess and python-chess's runner order a book differently: one seed, two orders of openings.
            raise ValueError(f"{match['name']}: matches of one seed must share a runner (fastchess and python order "
                             "the openings differently)")
        if match.get("tree") and not Path(deeptree).is_file():
            raise ValueError(f"no deeptree at {deeptree} (build it, or set DEEPTREE)")
    return matches


def python_runner(match):
    """Whether a plan's match is played by python-chess's runner rather than fastchess: one that ponders (fastchess
    does not), or one with "runner": "python" (the same runner as a pondering match it is compared with)."""
    return bool(match.get("ponder")) or match.get("runner") == "python"


def chunk_games(games):
    """Games a chunk, rounded up to pairs (one opening with both colours)."""
    return 2 * ((max(games, 1) + 1) // 2)


def chunk_queue(matches, games_a_chunk):
    """Every chunk of every match, in the order they are played: by priority (lowest first), then chunk number, then
    plan order, so that matches of one priority advance together."""
    queue = []
    for order, match in enumerate(matches):
        left, index = int(match["games"]), 0
        while left > 0:
            games = min(games_a_chunk, 2 * ((left + 1) // 2))
            queue.append(Chunk(match["priority"], index, order, match, games))
            left -= games
            index += 1
    queue.sort(key=lambda chunk: chunk[:3])
    return queue


def chunk_files(out, match, index):
    """The log and the PGN of a chunk in OUT/NAME."""
    folder = Path(out) / match["name"]
    return folder / f"chunk-{index:03d}.log", folder / f"chunk-{index:03d}.pgn"


def chunk_arguments(match, index, games, pgn, deeptree, stockfish, tree=None, opponent=None):
    """scripts/match's arguments for chunk `index` of a match: seed SEED + index; deeptree on `tree` (a fresh copy of
    the match's tree) against Stockfish, or against deeptree on `opponent`; Stockfish against Stockfish where the
    match has no tree (the control). Threads=1 and Hash=16 on both sides."""
    common = ["--tc", match["tc"], "--games", str(games), "--seed", str(int(match["seed"]) + index), "--book",
              match["book"], "--pgn", str(pgn), "--option1", "Threads=1", "--option1", "Hash=16", "--option2",
              "Threads=1", "--option2", "Hash=16"]
    if match.get("tree"):
        first = ["--engine1", f"{deeptree} --db {tree}", "--name1", match.get("player", "deeptree"),
                 "--option1", f"InnerEngine={stockfish}", "--option1", "BackgroundAnalysis=false"]
        for option in match.get("options", []):
            first += ["--option1", option]
        second = ["--engine2", stockfish, "--name2", "stockfish"]
        if match.get("opponent_tree"):
            # Head to head: the opponent is deeptree too, on a fresh copy of its own tree.
            second = ["--engine2", f"{deeptree} --db {opponent}", "--name2", match.get("opponent", "opponent"),
                      "--option2", f"InnerEngine={stockfish}", "--option2", "BackgroundAnalysis=false"]
            for option in match.get("options", []):
                second += ["--option2", option]
    else:
        first = ["--engine1", stockfish, "--name1", "stockfish-a"]
        second = ["--engine2", stockfish, "--name2", "stockfish-b"]
    # Pondering: python-chess's runner plays the chunk (fastchess does not ponder).
    ponder = ["--ponder"] if match.get("ponder") else []
    return [*first, *second, *common, *ponder]


def play_chunk(match, index, games, out, deeptree, stockfish):
    """One chunk: scripts/match on fresh copies of the match's trees, its output into the chunk's log; returns its
    exit status."""
    log, pgn = chunk_files(out, match, index)
    with tempfile.TemporaryDirectory(prefix="chunk-tree.") as scratch:
        tree = opponent = None
        if match.get("tree"):
            tree = Path(scratch) / "tree"
            shutil.copytree(match["tree"], tree, ignore=shutil.ignore_patterns("claims"))
        if match.get("opponent_tree"):
            opponent = Path(scratch) / "opponent"
            shutil.copytree(match["opponent_tree"], opponent, ignore=shutil.ignore_patterns("claims"))
        arguments = chunk_arguments(match, index, games, pgn, deeptree, stockfish, tree, opponent)
        # A pondering chunk (or a match that asks for it) is played by python-chess's runner, which scripts/match
        # uses where FASTCHESS is unset.
        env = {k: v for k, v in os.environ.items() if not (python_runner(match) and k == "FASTCHESS")}
        with open(log, "w") as handle:
            return subprocess.run([sys.executable, str(SCRIPTS / "match"), *arguments], stdout=handle,
                                  stderr=subprocess.STDOUT, env=env).returncode


# fastchess's summaries, read back and pooled (scripts/match-pool).

Summary = namedtuple("Summary", "wins losses draws ptnml")
Summary.__doc__ = "A match's wins, losses and draws (of the first engine) and its Ptnml(0-2) counts."


def read_summary(text):
    """The last `Games: N, Wins: W, Losses: L, Draws: D` and `Ptnml(0-2): [...]` lines of a fastchess log (or a
    scripts/match output): its final summary. None where it has none."""
    games, pairs = GAMES.findall(text), PTNML.findall(text)
    if not games or not pairs:
        return None
    _, wins, losses, draws = map(int, games[-1])
    return Summary(wins, losses, draws, [int(p) for p in pairs[-1]])


def read_logs(paths):
    """The final Summary of each log at PATHS (plain, xz or gzip), pooled: a ValueError names a log without one."""
    return read_pooled(paths)[0]


def read_pooled(paths):
    """The logs at PATHS, each read once: their final Summaries pooled (a ValueError names a log without one) and
    their Clocks pooled (empty for fastchess logs)."""
    summaries, clocks = [], []
    for path in paths:
        with pgn.open_text(path) as handle:
            text = handle.read()
        summary = read_summary(text)
        if summary is None:
            raise ValueError(f"{path}: no fastchess summary")
        summaries.append(summary)
        clocks.append(read_clocks(text))
    return pool_summaries(summaries), pool_clocks(clocks)


def pool_summaries(summaries):
    """The Summary of several runs of one pairing, added up."""
    wins = sum(s.wins for s in summaries)
    losses = sum(s.losses for s in summaries)
    draws = sum(s.draws for s in summaries)
    ptnml = [sum(column) for column in zip(*(s.ptnml for s in summaries))] if summaries else [0] * 5
    return Summary(wins, losses, draws, ptnml)


def pooled_lines(summary):
    """A pooled Summary as fastchess prints its results: games, W/L/D, pairs, Elo with its 95 % interval, LOS."""
    estimate = stats.pentanomial(summary.ptnml)
    return [f"Games: {summary.wins + summary.losses + summary.draws}, Wins: {summary.wins}, "
            f"Losses: {summary.losses}, Draws: {summary.draws}",
            f"Ptnml(0-2): {summary.ptnml}",
            f"Elo: {estimate.elo:.2f} +/- {stats.half_width(estimate):.2f} (95%: {estimate.low:.2f} to "
            f"{estimate.high:.2f})",
            f"LOS: {100 * estimate.los:.2f} %"]


Clock = namedtuple("Clock", "moves losses least hits medians p99 longest")
Clock.__doc__ = """One side's clock over one or more of scripts/match's runs: moves, games lost on time, the least time
left after a move (seconds; None where no move was timed), and its thinks after `ponderhit`: how many, the median of
each run's (one a run), the largest of the runs' p99s and the longest (seconds)."""


def read_clocks(text):
    """Each side's Clock from scripts/match's output (its clock lines and, with pondering, the thinks after
    `ponderhit`), by engine name; empty where it has none (a fastchess log)."""
    clocks = {}
    for name, moves, losses, least in CLOCK.findall(text):
        seconds = None if least == "n/a" else float(least.removesuffix(" s"))
        clocks[name] = Clock(int(moves), int(losses), seconds, 0, [], 0.0, 0.0)
    for name, hits, median, p99, longest in AFTER_PONDERHIT.findall(text):
        if name in clocks:
            clocks[name] = clocks[name]._replace(hits=int(hits), medians=[float(median)], p99=float(p99),
                                                 longest=float(longest))
    return clocks


def pool_clocks(runs):
    """The Clocks of several runs of one pairing (read_clocks of each), added up side by side."""
    pooled = {}
    for clocks in runs:
        for name, clock in clocks.items():
            if name not in pooled:
                pooled[name] = clock
                continue
            was = pooled[name]
            leasts = [t for t in (was.least, clock.least) if t is not None]
            pooled[name] = Clock(was.moves + clock.moves, was.losses + clock.losses, min(leasts, default=None),
                                 was.hits + clock.hits, was.medians + clock.medians, max(was.p99, clock.p99),
                                 max(was.longest, clock.longest))
    return pooled


def clock_lines(pooled):
    """Pooled Clocks as lines: each side's moves, time losses and least time left, then its thinks after
    `ponderhit` (the runs' medians as their median and range: a run gives its median, not its times)."""
    lines = []
    for name, clock in pooled.items():
        least = "n/a" if clock.least is None else f"{clock.least:.3f} s"
        lines.append(f"clock of {name}: {clock.moves} moves, {clock.losses} time losses, least time left {least}")
    for name, clock in pooled.items():
        if clock.hits:
            medians = sorted(clock.medians)
            middle = medians[len(medians) // 2]
            lines.append(f"moves after ponderhit of {name}: {clock.hits} in {len(medians)} runs, median of the runs' "
                         f"medians {middle:.3f} s ({medians[0]:.3f} to {medians[-1]:.3f}), largest p99 "
                         f"{clock.p99:.3f} s, longest {clock.longest:.3f} s")
    return lines


def draw_lines(summary):
    """A pooled Summary's resolving power: its draw rate with the Wilson 95 % interval, and the share of its game
    pairs that score 1-1 (both games drawn, or one win each), the pairs that say nothing of which side is stronger."""
    games = summary.wins + summary.losses + summary.draws
    pairs = sum(summary.ptnml)
    low, high = stats.wilson(summary.draws, games)
    even_low, even_high = stats.wilson(summary.ptnml[2], pairs)
    return [f"Games: {games}, draws: {summary.draws}, draw rate {100 * summary.draws / games:.1f} % "
            f"(95 %: {100 * low:.1f} to {100 * high:.1f})",
            f"Ptnml(0-2): {summary.ptnml}: {summary.ptnml[2]} of {pairs} pairs 1-1, "
            f"{100 * summary.ptnml[2] / pairs:.1f} % (95 %: {100 * even_low:.1f} to {100 * even_high:.1f})"]
