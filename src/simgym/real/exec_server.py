"""The runner's helper inside a warm sandbox (``python3 -I -S exec_server.py``): it reads
one JSON request a line on stdin, runs the command in a new session on a pseudo-terminal
(or pipes), and answers one JSON line on stdout: the output (base64), the exit status,
and why it stopped early, if it did. One process for the whole episode, so a command costs
a fork and an exec instead of a new sandbox. Standard library only: it runs on the host's
``/usr/bin/python3`` without simgym.
"""

import base64
import ctypes
import fcntl
import json
import os
import select
import signal
import struct
import sys
import termios
import time


def _undumpable() -> None:
    # commands run as the same user: without this they could open our pipes in /proc
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass


def _child(argv, env, cwd, terminal, slave):
    try:
        os.setsid()
        if terminal:
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            os.dup2(slave, 0)
        else:
            os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
        os.dup2(slave, 1)
        os.dup2(slave, 2)
        os.closerange(3, 4096)
        os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    except BaseException:
        os._exit(127)


def _run(request):
    terminal = request["terminal"]
    if terminal:
        master, slave = os.openpty()
        size = struct.pack("HHHH", request["lines"], request["columns"], 0, 0)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    else:
        master, slave = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(master)
        _child(request["argv"], request["env"], request["cwd"], terminal, slave)
    os.close(slave)
    chunks, total, why = [], 0, None
    deadline = time.monotonic() + request["limit"]
    while True:
        left = deadline - time.monotonic()
        ready = select.select([master], [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            why = "timeout"
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            data = b""
        if not data:
            break
        chunks.append(data)
        total += len(data)
        if total > request["cap"]:
            why = "flood"
            break
    if why is not None:
        _kill(pid)
    _, status = os.waitpid(pid, 0)
    _kill(pid)  # what it left running in the background goes with it
    os.close(master)
    code = os.waitstatus_to_exitcode(status)
    return {"out": base64.b64encode(b"".join(chunks)).decode(), "status": code, "why": why}


def _kill(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def main():
    _undumpable()
    for raw in sys.stdin.buffer:
        try:
            answer = _run(json.loads(raw))
        except Exception as exc:  # a bad request costs its answer, not the server
            answer = {"out": "", "status": -1, "why": f"{type(exc).__name__}: {exc}"}
        sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
