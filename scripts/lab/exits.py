"""Where games leave a grown tree: for each game of a player, the first move of its side in the first moves that
its engine searched after one it answered from the tree (lab.pgn's rule: the runner's mark, else 5 ms), the
opponent's reply before that move, and what the tree held there.

An exit is classed by the tree as grown (its `deeptree show --json` at the position before the reply):

- `outside`: that position is not in the tree, or has no valued move (the answer before it came from what the match
  itself stored, or a transposition the growth never walked);
- `never valued`: the reply is not among the moves the tree valued there;
- `valued`: it is; with the reply's loss in centipawns below the best move the tree valued there (from the side to
  move), and whether the position it led to has an evaluation in the tree.

The reach the growth's walk gives an exit (`reach`) is the product, over the opponent's moves on the game's path,
of `exp(-loss / T)` normalised over the replies the tree valued within 5 T of the best (the walk's reply model,
docs/design.md §6.1); the tree's own moves count 1. It is a share of one side's games of the seed (the game's
opening position).
"""

import collections
import math

Exit = collections.namedtuple("Exit", "move_number before reply after path")
Exit.__doc__ = ("A game's exit: the move number of the searched move, the position before the opponent's reply (a "
                "python-chess Board), the reply, the position after it, and the game's moves from its start up to "
                "the reply as (board before, move, the opponent's move or not).")


def find_exit(game, player, is_tree_answer, parse_comment, opening_moves=15):
    """The Exit of PLAYER in a python-chess GAME, or None where its first opening_moves moves never leave the tree
    after an answer from it (is_tree_answer and parse_comment: lab.pgn's)."""
    import chess

    if player not in (game.headers.get("White"), game.headers.get("Black")):
        return None
    colour = chess.WHITE if game.headers.get("White") == player else chess.BLACK
    board = game.board()
    answered_before = False
    before, reply = None, None
    path = []
    for node in game.mainline():
        if board.fullmove_number > opening_moves:
            return None
        if board.turn == colour:
            answered = is_tree_answer(parse_comment(node.comment))
            if not answered and answered_before and before is not None:
                return Exit(board.fullmove_number, before, reply, board.copy(stack=False), path)
            answered_before = answered
        else:
            before, reply = board.copy(stack=False), node.move
        path.append((board.copy(stack=False), node.move, board.turn != colour))
        board.push(node.move)
    return None


def centipawns(score):
    """A `show --json` score ({"cp": n} or {"mate": n}) as centipawns, mates far beyond any; None without one."""
    if not score:
        return None
    if "cp" in score:
        return score["cp"]
    mate = score.get("mate")
    if mate is None:
        return None
    return (100000 - abs(mate)) * (1 if mate > 0 else -1)


def valued(shown):
    """{uci: centipawns} of the moves a `show --json` object values (its idea score), those without a score left out."""
    if not shown:
        return {}
    moves = {}
    for move in shown.get("moves") or []:
        value = centipawns(move.get("idea") or move.get("alpha"))
        if value is not None:
            moves[move["uci"]] = value
    return moves


def classify(shown_before, reply_uci):
    """('outside', None), ('never valued', None) or ('valued', loss in centipawns) for the reply REPLY_UCI at the
    position whose `show --json` object is SHOWN_BEFORE (None where show found nothing)."""
    moves = valued(shown_before)
    if not moves:
        return "outside", None
    if reply_uci not in moves:
        return "never valued", None
    return "valued", max(moves.values()) - moves[reply_uci]


def reply_share(moves, reply_uci, temperature=20.0):
    """The walk's probability of the reply REPLY_UCI among MOVES ({uci: centipawns}, from the side to move): exp(-loss
    / T) normalised over the replies within 5 T of the best; 0 where it is not among them."""
    if reply_uci not in moves:
        return 0.0
    best = max(moves.values())
    weights = {uci: math.exp(-(best - value) / temperature) for uci, value in moves.items()
               if best - value <= 5 * temperature}
    return weights.get(reply_uci, 0.0) / sum(weights.values())


def reach(path, lookup, temperature=20.0):
    """The reach of the position a PATH (Exit.path) ends in, by the walk's reply model, with LOOKUP(board) giving the
    `show --json` object of a position (None where the tree has none); None where a reply on the path was never
    valued (the walk never went that way)."""
    share = 1.0
    for board, move, opponents in path:
        if not opponents:
            continue
        moves = valued(lookup(board))
        if move.uci() not in moves:
            return None
        share *= reply_share(moves, move.uci(), temperature)
    return share
