"""``python -m simgym.bench``: the benchmark commands without the main ``simgym`` CLI."""

from simgym.cli.bench import main

main()
