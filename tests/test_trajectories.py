import json
import threading

import pytest

import simgym
from simgym import Task, Trajectory, TrajectoryWriter, finished_ids, read_trajectories


def traj(i: int) -> Trajectory:
    return Trajectory(task=Task(id=f"t{i}"), domain="terminal")


def test_writer_appends_one_line_per_episode(tmp_path):
    path = tmp_path / "a" / "t.jsonl"
    with TrajectoryWriter(path) as w:
        w.write(traj(1))
    with TrajectoryWriter(path) as w:  # reopening appends
        w.write(traj(2))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["schema_version"] == 1
    assert [t.task.id for t in read_trajectories(path)] == ["t1", "t2"]


def test_torn_last_line_is_skipped_and_repaired(tmp_path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as w:
        w.write(traj(1))
    with open(path, "a") as f:
        f.write('{"schema_version": 1, "task": {"id": "t2"')  # a crash mid-write
    with pytest.warns(UserWarning, match="skipping unreadable"):
        assert [t.task.id for t in read_trajectories(path)] == ["t1"]
    assert finished_ids(path) == {"t1"}
    with TrajectoryWriter(path) as w:  # the next write starts on a fresh line
        w.write(traj(3))
    with pytest.warns(UserWarning):
        assert [t.task.id for t in read_trajectories(path)] == ["t1", "t3"]
    with pytest.raises(simgym.SimgymError, match="unreadable"):
        list(read_trajectories(path, strict=True))


def test_concurrent_writers_never_interleave(tmp_path):
    path = tmp_path / "t.jsonl"
    w = TrajectoryWriter(path, fsync=False)
    threads = [
        threading.Thread(target=lambda k=k: [w.write(traj(k * 100 + j)) for j in range(50)])
        for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    assert len(list(read_trajectories(path))) == 200


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(simgym.SimgymError, match="not found"):
        list(read_trajectories(tmp_path / "none.jsonl"))
    assert finished_ids(tmp_path / "none.jsonl") == set()
