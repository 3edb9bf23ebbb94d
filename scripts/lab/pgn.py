"""Reading match PGNs: fastchess's move comments, the tag pairs, and the moves a player answered from the tree.

fastchess writes each move's comment as `{+0.31/16 0.004s, tl=1.905s}`: the score in pawns from the mover's side
(or M3 / -M3), the depth its search reached, the seconds from `go` to `bestmove`, and (with timeleft=true) the clock
left after the move; scripts/match's python-chess runner writes the same without the clock, and marks each move
`, tree` where deeptree said it answered from the tree (its `info string tree move: ...`) and `, search` otherwise.
A marked move is what its mark says; an unmarked one (fastchess's) that took under 5 ms (TREE_SECONDS) was answered
from the tree: a search of the inner engine takes longer. With pondering only the marks tell them apart: a move after
`ponderhit` comes as fast, and a tree answer after one need not. A tree answer's depth is the depth the tree claimed
for it.

The depth margin of a tree answer is its claimed depth less the mean depth of the opponent's own searches (its moves
of 5 ms or more) at the plies next to it in the same game: the opponent's move before it and the one after it, where
they are searches. A positive margin: the tree answered deeper than the engine searched there.

Files may be plain, xz- or gzip-compressed (.xz, .gz), or `-` for standard input. The tag reader (tag_games) needs
nothing beyond Python; the rest needs python-chess.
"""

import gzip
import io
import lzma
import re
import statistics
import sys
from collections import Counter, namedtuple

try:
    import chess
    import chess.pgn
except ImportError:  # the tag reader works without python-chess
    chess = None

# Moves answered faster than this were answered from the tree.
TREE_SECONDS = 0.005
# The tree's moves are counted in the first moves of each game (later, simple endgames are answered that fast by a
# direct search too, so those are counted apart).
OPENING_MOVES = 15

NUMBER = r"\d+(?:\.\d+)?"
COMMENT = re.compile(rf"(?P<score>[+-]?M?{NUMBER})/(?P<depth>\d+) (?P<time>{NUMBER})s(?:, tl=(?P<left>-?{NUMBER})s)?"
                     r"(?:, (?P<source>tree|search)\b)?")
# The marks scripts/match's runner writes after a move's time: answered from the tree, or searched.
TREE_MARK, SEARCH_MARK = "tree", "search"
TAG = re.compile(r'^\[(\w+)\s+"(.*)"\]\s*$')

Comment = namedtuple("Comment", "score depth seconds left source", defaults=(None,))
Comment.__doc__ = ("A move's comment: score text, depth, seconds spent, clock left (None where not written), and the "
                   "runner's mark, 'tree' or 'search' (None where not written).")
Played = namedtuple("Played", "side move_number comment")
Played.__doc__ = ("One move of a game's main line: the side that played it (True: White), the move number it was "
                  "played at, and its Comment (None where the comment has none).")


def open_text(path):
    """A text handle on a PGN or log: `-` is standard input; .xz and .gz files are decompressed."""
    if path == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    if str(path).endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8", errors="replace")
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def parse_comment(text):
    """The Comment of fastchess's move comment text, or None where it holds no score/depth time."""
    found = COMMENT.search(text or "")
    if found is None:
        return None
    left = found["left"]
    return Comment(found["score"], int(found["depth"]), float(found["time"]), None if left is None else float(left),
                   found["source"])


def is_tree_answer(comment):
    """Whether a move with this Comment was answered from the tree: its mark says so, or unmarked it took under 5 ms."""
    if comment is None:
        return False
    if comment.source is not None:
        return comment.source == TREE_MARK
    return comment.seconds < TREE_SECONDS


def is_search(comment):
    """Whether a move with this Comment was a search of the engine: its mark says so, or unmarked it took 5 ms or
    more."""
    if comment is None:
        return False
    if comment.source is not None:
        return comment.source == SEARCH_MARK
    return comment.seconds >= TREE_SECONDS


def read_games(path):
    """The games of a PGN file, one python-chess game at a time."""
    with open_text(path) as handle:
        while (game := chess.pgn.read_game(handle)) is not None:
            yield game


def played_moves(game):
    """The game's main line as Played moves (side, move number, parsed comment)."""
    board = game.board()
    side, number = board.turn, board.fullmove_number
    moves = []
    for node in game.mainline():
        moves.append(Played(side, number, parse_comment(node.comment)))
        if side == chess.BLACK:
            number += 1
        side = not side
    return moves


def tag_games(path):
    """The tag pairs of each game, read without python-chess, with 'time forfeit' set where the game ended on time
    (a Termination tag saying so, or fastchess's end comment `loses on time`)."""
    tags, movetext = {}, []
    with open_text(path) as handle:
        for line in handle:
            match = TAG.match(line)
            if match:
                if movetext and tags:
                    yield _finished(tags, movetext)
                    tags, movetext = {}, []
                tags[match.group(1)] = match.group(2)
            elif line.strip():
                movetext.append(line)
    if tags:
        yield _finished(tags, movetext)


def _finished(tags, movetext):
    tags["time forfeit"] = "time forfeit" in tags.get("Termination", "") or "loses on time" in " ".join(movetext)
    return tags


def player_score(tags, player):
    """PLAYER's score in a game from its tags: 1, 0.5 or 0; None where the game has no result or not that player."""
    result = tags.get("Result", "*")
    if player not in (tags.get("White"), tags.get("Black")) or result not in ("1-0", "0-1", "1/2-1/2"):
        return None
    if result == "1/2-1/2":
        return 0.5
    return float((result == "1-0") == (tags.get("White") == player))


def margin_band(move_number):
    """The band of move numbers a depth margin is reported in."""
    return "1-5" if move_number <= 5 else "6-10" if move_number <= 10 else "11-15" if move_number <= 15 else "16+"


MARGIN_BANDS = ("1-5", "6-10", "11-15", "16+")


class TreeMoves:
    """One player's moves answered from the tree over the games of a PGN, with their depths and depth margins."""

    def __init__(self, player, opening_moves=OPENING_MOVES):
        self.player = player
        self.opening_moves = opening_moves
        self.games = 0
        self.moves = 0                 # the player's moves
        self.per_game = []             # tree answers in the first opening_moves moves, game by game
        self.opening_depths = Counter()  # claimed depths of those answers
        self.later = 0                 # tree answers after the first opening_moves moves
        self.depths = Counter()        # claimed depths of all tree answers
        self.margins = []              # (move number, margin) of each tree answer with an opponent's search beside it
        self.own_searches = []         # depths of the player's searches (5 ms or more)
        self.opponent_searches = []    # depths of the opponent's searches
        self.opponents = Counter()

    def add(self, game):
        """Counts one game; returns False (and counts nothing) where the player did not play in it."""
        white, black = game.headers.get("White"), game.headers.get("Black")
        if self.player not in (white, black):
            return False
        colour = chess.WHITE if white == self.player else chess.BLACK
        self.opponents[black if colour == chess.WHITE else white] += 1
        self.games += 1
        moves = played_moves(game)
        opening = 0
        for i, (side, number, comment) in enumerate(moves):
            if side != colour:
                if is_search(comment):
                    self.opponent_searches.append(comment.depth)
                continue
            self.moves += 1
            if is_search(comment):
                self.own_searches.append(comment.depth)
            if not is_tree_answer(comment):
                continue
            self.depths[comment.depth] += 1
            if number > self.opening_moves:
                self.later += 1
            else:
                opening += 1
                self.opening_depths[comment.depth] += 1
            around = [moves[j].comment.depth for j in (i - 1, i + 1)
                      if 0 <= j < len(moves) and moves[j].side != colour and is_search(moves[j].comment)]
            if around:
                self.margins.append((number, comment.depth - statistics.mean(around)))
        self.per_game.append(opening)
        return True

    @property
    def opening(self):
        """Tree answers in the first opening_moves moves."""
        return sum(self.per_game)

    @property
    def total(self):
        """Tree answers over whole games."""
        return self.opening + self.later

    def report(self):
        """The report's lines: the first three as scripts/tree-moves always printed them, then the whole games, the
        depth margin and the searches' depths."""
        games = max(self.games, 1)
        opponents = ", ".join(name for name, _ in self.opponents.most_common()) or "none"
        lines = [
            f"{self.games} games, {self.moves} {self.player} moves, {self.opening} from the tree (marked so, or "
            f"answered in under 5 ms, in the first {self.opening_moves} moves): {self.opening / games:.2f} a game; "
            f"{self.later} so answered later",
            "tree moves per game: " + " ".join(str(n) for n in self.per_game),
            "depths claimed: " + ", ".join(f"{d}: {n}" for d, n in sorted(self.opening_depths.items())),
            f"whole games: {self.total} tree moves ({self.total / games:.2f} a game); depths claimed: "
            + ", ".join(f"{d}: {n}" for d, n in sorted(self.depths.items())),
        ]
        margins = [m for _, m in self.margins]
        if margins:
            spread = statistics.stdev(margins) if len(margins) > 1 else 0.0
            lines.append(f"depth margin: {statistics.mean(margins):+.2f} plies over {len(margins)} tree moves with "
                         f"an opponent's search next to them (sd {spread:.2f}; median "
                         f"{statistics.median(margins):+.1f})")
            for band in MARGIN_BANDS:
                in_band = [m for number, m in self.margins if margin_band(number) == band]
                if in_band:
                    lines.append(f"  moves {band:>5}: {len(in_band):>5} answers, margin "
                                 f"{statistics.mean(in_band):+.2f}")
        else:
            lines.append("depth margin: no tree move with an opponent's search next to it")
        for who, depths in ((self.player, self.own_searches), (f"opponent ({opponents})", self.opponent_searches)):
            mean = f"{statistics.mean(depths):.2f}" if depths else "-"
            lines.append(f"mean depth a search (moves of 5 ms or more), {who}: {mean} over {len(depths)} moves")
        return lines


def count_tree_moves(paths, players=None, opening_moves=OPENING_MOVES):
    """TreeMoves of each player over the games of the PGN files (every player that appears where none is named),
    in the order named or first seen."""
    tallies = {name: TreeMoves(name, opening_moves) for name in players or []}
    for path in paths:
        for game in read_games(path):
            if not players:
                for name in (game.headers.get("White"), game.headers.get("Black")):
                    tallies.setdefault(name, TreeMoves(name, opening_moves))
            for tally in tallies.values():
                tally.add(game)
    return list(tallies.values())


def tree_answers(paths, player, opening_moves=OPENING_MOVES, claimed=None):
    """(board before the move, move, Comment) of each of PLAYER's tree answers in the first opening_moves moves,
    optionally only those whose claimed depth lies in claimed = (low, high)."""
    for path in paths:
        for game in read_games(path):
            if player not in (game.headers.get("White"), game.headers.get("Black")):
                continue
            colour = chess.WHITE if game.headers.get("White") == player else chess.BLACK
            board = game.board()
            for node in game.mainline():
                if board.turn == colour and board.fullmove_number <= opening_moves:
                    comment = parse_comment(node.comment)
                    if is_tree_answer(comment) and (claimed is None or claimed[0] <= comment.depth <= claimed[1]):
                        yield board.copy(stack=False), node.move, comment
                board.push(node.move)


class Phase:
    """Moves, time and claimed depth of one engine over a set of its moves (a range of move numbers, or its first
    moves)."""

    def __init__(self):
        self.moves = self.depth = 0
        self.time = 0.0

    def add(self, comment):
        self.moves += 1
        self.time += comment.seconds
        self.depth += comment.depth


class Clocks:
    """One engine's clock and depth over the games of PGNs: games (the sides it played: a game against itself counts
    twice), moves with a comment, their time and depth, the same for the first move of each game (a cold engine), the
    least clock left, games lost on time, and with phases (the last move number of each phase but the last) the
    moves, time and depth of each phase. The totals are the phases' sums."""

    def __init__(self, phases=()):
        self.games = self.time_losses = 0
        self.least_left = None
        self.first = Phase()
        self.phase_ends = tuple(phases)
        self.phases = [Phase() for _ in range(len(self.phase_ends) + 1)]

    def add(self, comment, first, move_number=1):
        if comment.left is not None:
            self.least_left = comment.left if self.least_left is None else min(self.least_left, comment.left)
        if first:
            self.first.add(comment)
        self.phases[sum(1 for end in self.phase_ends if move_number > end)].add(comment)

    @property
    def moves(self):
        return sum(phase.moves for phase in self.phases)

    @property
    def time(self):
        return sum(phase.time for phase in self.phases)

    @property
    def depth(self):
        return sum(phase.depth for phase in self.phases)


def phase_names(ends):
    """The phases' names for the last move numbers of each phase but the last: (10, 30) gives 1-10, 11-30, 31+."""
    starts = [1] + [end + 1 for end in ends]
    return [f"{start}-{end}" for start, end in zip(starts, ends)] + [f"{starts[-1]}+"]


def clocks(paths, phases=()):
    """Clocks of each engine (by its PGN name) over the games of the PGN files; phases as Clocks takes them."""
    engines = {}
    for path in paths:
        for game in read_games(path):
            names = {chess.WHITE: game.headers.get("White"), chess.BLACK: game.headers.get("Black")}
            for name in names.values():
                engines.setdefault(name, Clocks(phases)).games += 1
            if "time" in game.headers.get("Termination", "").lower():
                loser = {"1-0": chess.BLACK, "0-1": chess.WHITE}.get(game.headers.get("Result"))
                if loser is not None:
                    engines[names[loser]].time_losses += 1
            seen = set()
            for side, number, comment in played_moves(game):
                if comment is None:
                    continue
                engines[names[side]].add(comment, side not in seen, number)
                seen.add(side)
    return engines
