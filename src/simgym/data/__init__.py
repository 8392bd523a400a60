"""Trajectory files and converters."""

from simgym.core.trajectories import TrajectoryWriter, finished_ids, read_trajectories

__all__ = ["TrajectoryWriter", "finished_ids", "read_trajectories"]
