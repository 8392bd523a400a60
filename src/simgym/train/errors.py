"""The error the training tools raise: bad data, a missing checkpoint, an unusable model."""

from __future__ import annotations

from simgym.core.errors import SimgymError


class TrainError(SimgymError):
    """Training or export cannot go on; the message says what to fix."""
