"""The lab kit: what deeptree's match, PGN, bench and chart commands in scripts/ share.

- lab.matches: running engines and matches (openings, fastchess's command line, python-chess's runner, match plans
  cut into chunks, the summaries fastchess prints);
- lab.pgn: reading PGNs (fastchess's move comments, tag pairs) and counting the moves answered from the tree, with
  their depth margin;
- lab.stats: Elo with its 95 % interval, from per-game scores or from game pairs (pentanomial), and the likelihood of
  superiority;
- lab.charts: the SVG charts (Elo against growth budget, the duel's verdicts, the host's scaling).

The commands in scripts/ put scripts/ on the module path and import from here; the unit tests
(scripts/lab/tests) run with `python3 -m unittest discover -s scripts/lab/tests -t scripts`.
"""
