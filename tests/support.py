"""Small helpers shared by the tests."""

from __future__ import annotations


def ls_trajectory(**fields):
    """A one-turn terminal trajectory: ``ls`` in a home holding notes.txt (``fields``
    adds to or replaces the Trajectory's own)."""
    import simgym

    return simgym.Trajectory(
        **{
            "task": simgym.Task(id="t", instruction="Look around", domain="terminal"),
            "domain": "terminal",
            "scenario": {"user": "dev", "hostname": "box"},
            "initial_observation": simgym.Observation(text="dev@box:~$"),
            "turns": [
                simgym.Turn(
                    index=1,
                    action=simgym.Action.keys("ls\n"),
                    action_text='[{"keystrokes": "ls\\n", "duration": 1}]',
                    observation=simgym.Observation(text="dev@box:~$ ls\nnotes.txt\ndev@box:~$"),
                )
            ],
            **fields,
        }
    )


def scripted_world(observations):
    """A world model (for FunctionWorldModel) that answers turn N with observations[N - 1],
    tagged like a real model would."""

    def world(messages):
        turn = sum(1 for m in messages if m["role"] == "user")
        return f"<predicted_observation>\n{observations[turn - 1]}\n</predicted_observation>"

    return world


def play_suite_plans(tasks, play, wrong, tmp_path, backends=("real", "sim"), world_model="local"):
    """Play a sim2real task set's plans with ``play`` (``reference``, ``reader`` or
    ``wrong``: ``wrong(task)`` gives the plan) on ``backends`` (the twin on
    ``world_model``), one episode a task; return the report and each backend's episodes
    by key."""
    from simgym.agents import ScriptedAgent
    from simgym.bench.sim2real import ReaderAgent, evaluate
    from simgym.bench.sim2real.plans import reference_solution
    from simgym.core.trajectories import read_trajectories

    if play == "reader":
        agent = ReaderAgent(tasks)
    else:
        plan = reference_solution if play == "reference" else wrong
        agent = ScriptedAgent(by_task={t.id: plan(t) for t in tasks})
    report = evaluate(
        tasks,
        agent=agent,
        condition=play,
        k=1,
        max_turns=6,
        backends=list(backends),
        out_dir=tmp_path,
        world_model=world_model,
    )
    episodes = {
        backend: {t.key: t for t in read_trajectories(tmp_path / f"{backend}.jsonl")}
        for backend in backends
    }
    return report, episodes


def same_screens(real, sim):
    """Whether the twin showed what the real world showed, turn for turn, in every
    episode both played."""
    pairs = [(a, b) for k in real for a, b in zip(real[k].turns, sim[k].turns, strict=True)]
    return bool(pairs) and all(a.observation.text == b.observation.text for a, b in pairs)
