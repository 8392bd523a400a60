"""The world-model request for a benchmark row, in the message contract.

The sample's own ``system_str`` is the system message; each earlier turn is its user
message (``prompt[i]``) and its real observation as the assistant message
(``response[i]``), both verbatim; the current turn's ``current_prompt`` is the last user
message. Nothing is reformatted, so a model trained on this layout sees exactly what the
reference evaluation sends.
"""

from __future__ import annotations

from simgym.bench.data import BenchRow

Messages = list[dict[str, str]]


def build_messages(row: BenchRow) -> Messages:
    """System prompt, the earlier turns verbatim, then the action to simulate."""
    messages: Messages = []
    if row.system_str:
        messages.append({"role": "system", "content": row.system_str})
    earlier = min(row.turn_idx - 1, len(row.prompt), len(row.response))
    for i in range(earlier):
        messages.append({"role": "user", "content": row.prompt[i]})
        messages.append({"role": "assistant", "content": row.response[i]})
    messages.append({"role": "user", "content": row.current_prompt})
    return messages
