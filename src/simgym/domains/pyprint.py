"""What a Python program prints, for the few programs whose output is certain without
running them: every statement that runs prints literals (a docstring, ``pass`` and an
``if __name__ == "__main__":`` guard aside). Nothing is executed; the source is only
parsed and compiled. Anything else (a name, a call, an import, a loop) is the world
model's to render."""

from __future__ import annotations

import ast


def literal_output(source: str) -> str | None:
    """The exact standard output of ``source`` run as a program, or None when it does
    anything but print literals (or would not compile, which Python reports itself)."""
    try:
        tree = ast.parse(source)
        compile(tree, "<program>", "exec")  # what only compiling finds (a stray return)
    except (SyntaxError, ValueError):
        return None
    out: list[str] = []
    if not _run(tree.body, out):
        return None
    return "".join(out)


def _run(body: list[ast.stmt], out: list[str]) -> bool:
    for statement in body:
        if isinstance(statement, ast.Pass):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring or a bare literal: evaluated, nothing shown
        if isinstance(statement, ast.If) and _is_main_guard(statement.test):
            if not _run(statement.body, out):
                return False
            continue  # the else branch never runs when the file is the program
        if isinstance(statement, ast.Expr):
            printed = _printed(statement.value)
            if printed is None:
                return False
            out.append(printed)
            continue
        return False
    return True


def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(mains) == 1


def _printed(call: ast.expr) -> str | None:
    """The text a ``print(...)`` of literals writes, or None for any other expression."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    if call.func.id != "print" or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    try:
        values = [ast.literal_eval(a) for a in call.args]
        options = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        if set(options) - {"sep", "end", "flush"}:
            return None  # file= writes elsewhere; **kwargs is not a literal
        sep = " " if options.get("sep") is None else options["sep"]
        end = "\n" if options.get("end") is None else options["end"]
        if not isinstance(sep, str) or not isinstance(end, str):
            return None  # Python raises TypeError; its traceback is the model's
        return sep.join(str(v) for v in values) + end
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None  # not a literal, or too large to print as text
