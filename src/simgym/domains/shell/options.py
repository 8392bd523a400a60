"""Command-line options read the way GNU's getopt reads them, one parser for the shell's
commands and the declared machine's programs (``df``): short flags bundled (``-la``),
short options with a value (``-k2``, ``-k 2``), long options (``--total``,
``--type=ext4``, ``--type ext4``), ``--`` ending the options, ``-`` an operand, and options
after operands (GNU permutes them).

The parser keeps the options in the order they came, because several programs let a later
option undo an earlier one (``df -h -k`` prints kibibytes). An option the caller does not
list makes the answer uncertain: :func:`parse_options` returns None, and the shell's
:func:`options` raises :class:`~simgym.domains.shell.view.Unknown`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from simgym.domains.shell.view import Unknown


@dataclass
class Parsed:
    """The options in the order given (name, value or None for a flag) and the operands."""

    options: list[tuple[str, str | None]] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)


def parse_options(
    args: list[str],
    flags: str,
    valued: str = "",
    *,
    long_flags: Collection[str] = (),
    long_valued: Collection[str] = (),
) -> Parsed | None:
    """Read ``args``: ``flags``/``long_flags`` take no value, ``valued``/``long_valued``
    take one. Long options are named without their dashes, exactly (no abbreviations).

    Args:
        args: the command's words after its name.
        flags: short options that take nothing, one letter each.
        valued: short options that take a value.
        long_flags: long options that take nothing (``--total=x`` is refused).
        long_valued: long options that take a value (``--type=x`` or ``--type x``).

    Returns:
        The options and operands, or None for an option not listed or a value missing.
    """
    parsed = Parsed()
    i, done = 0, False
    while i < len(args):
        arg = args[i]
        if done or not arg.startswith("-") or arg == "-":
            parsed.operands.append(arg)
        elif arg == "--":
            done = True
        elif arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in long_flags and not eq:
                parsed.options.append((name, None))
            elif name in long_valued:
                if not eq:
                    i += 1
                    if i >= len(args):
                        return None
                    value = args[i]
                parsed.options.append((name, value))
            else:
                return None
        else:
            j = 1
            while j < len(arg):
                letter = arg[j]
                if letter in valued:
                    value = arg[j + 1 :] or (args[i + 1] if i + 1 < len(args) else None)
                    if value is None:
                        return None
                    if not arg[j + 1 :]:
                        i += 1
                    parsed.options.append((letter, value))
                    break
                if letter not in flags:
                    return None
                parsed.options.append((letter, None))
                j += 1
        i += 1
    return parsed


def options(args: list[str], flags: str, valued: str) -> tuple[set[str], dict[str, str], list[str]]:
    """Short options: ``flags`` take nothing, ``valued`` take a value (``-k2``, ``-k 2``);
    anything else (long options included) makes the output uncertain (:class:`Unknown`).
    A valued option given twice keeps its last value."""
    parsed = parse_options(args, flags, valued)
    if parsed is None:
        raise Unknown
    found = {name for name, value in parsed.options if value is None}
    values = {name: value for name, value in parsed.options if value is not None}
    return found, values, parsed.operands


def short_flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    """Short flags (``-la``) and operands; an unknown flag makes the output uncertain."""
    flags, _, operands = options(args, allowed, "")
    return flags, operands
