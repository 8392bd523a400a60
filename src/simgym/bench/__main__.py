"""``python -m simgym.bench``: the benchmark commands without the main ``simgym`` CLI."""

from simgym.bench.cli import main

main()
