"""Unit tests of the lab kit: `python3 -m unittest discover -s scripts/lab/tests -t scripts` (seconds, no engines)."""
