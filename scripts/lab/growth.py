"""The steps of a growth run, read back from what `deeptree analyze` printed: where the engines' time went.

Each step line reads `grow N: priority P = reach R x 2^L (known K, target T, aim A) KIND ply Y of SEED to software
depth S at engine depth D: E evaluations, X s: FEN` (src/commands/analyze/report.rs), or `(known K, no target)` in a
run that deepens every seed while its budget lasts. A step is counted as

- an exit: KIND `the tree's move` (a position of the tree's side it does not answer) or `the replies` (one of the
  opponent's whose replies are not all searched): width;
- an answer deepened short of the aim: KIND `the tree's move a ply deeper`, known below the aim;
- an answer deepened at or past the aim by k plies (k = known - aim): depth a budget buys past the aim;
- a seed deepened itself: KIND `the seed itself`.

The seconds are each step's wall time on its group of engines (one engine where games are followed), so their sum
is the engines' time, not the run's.
"""

import collections
import re

STEP = re.compile(
    r"^grow +\d+: priority \S+ = reach (?P<reach>\S+) x 2\^(?P<lack>-?\d+) +\(known +(?P<known>\d+), "
    r"(?:target +(?P<target>\d+), aim +(?P<aim>\d+)|no target)\) (?P<kind>.+?) +ply +\d+ .*?: "
    r"(?P<evaluations>\d+) evaluations, (?P<seconds>[\d.]+) s"
)

EXIT_KINDS = ("the tree's move", "the replies")
DEEPER = "the tree's move a ply deeper"
SEED = "the seed itself"


def step_class(kind, known, aim):
    """The class of a step of KIND at a position known to KNOWN plies, with aim AIM (None: no target; see the module
    docs)."""
    if kind in EXIT_KINDS:
        return "exit: " + kind
    if kind == DEEPER and aim is not None:
        if known < aim:
            return "answer deepened short of the aim"
        return f"answer deepened at the aim +{known - aim}"
    return "seed deepened itself" if kind == SEED else "other: " + kind


Tally = collections.namedtuple("Tally", "steps evaluations seconds")


def time_by_class(lines):
    """{class: Tally} over the step lines among LINES (other lines are skipped)."""
    steps, evaluations, seconds = collections.Counter(), collections.Counter(), collections.Counter()
    for line in lines:
        found = STEP.match(line)
        if found is None:
            continue
        aim = None if found["aim"] is None else int(found["aim"])
        cls = step_class(found["kind"], int(found["known"]), aim)
        steps[cls] += 1
        evaluations[cls] += int(found["evaluations"])
        seconds[cls] += float(found["seconds"])
    return {cls: Tally(steps[cls], evaluations[cls], seconds[cls]) for cls in steps}


def order(cls):
    """Exits first, then answers by depth against the aim, then the rest."""
    if cls.startswith("exit"):
        return (0, cls)
    if cls.startswith("answer deepened short"):
        return (1, "")
    if cls.startswith("answer deepened at the aim +"):
        return (2, f"{int(cls.rsplit('+', 1)[1]):04d}")
    return (3, cls)
