"""The evaluation harness, one room per concept.

- at the top, the episode: the environment protocol (`environment`) and the environments
  installed packages register (`registry`), the one episode driver (`episode`), a bon
  attempt (`attempt`) and a search strategy's episode (`search_episode`) into the run
  folder, what an episode spent (`spend`), and its files copied as they are (`copying`);
  the reference agents that check a task set without a model (`agents`, `reference`);
- `running/`: the plan of a run, `turnbon bench` here or on Ray, the run folder, progress;
- `report/`: `turnbon report`, its sections, figures and HTML page;
- `stats/`: the metrics, the paired bootstrap and Holm-Bonferroni, all pairs at equal
  budget;
- `readers/`: run folders other tools wrote (Harbor's jobs);
- `strategies/`: search at the turn level; `values/`: the value functions it scores
  with; `metering/`: its spend under a budget.

The judge's and the branch rollouts' runs over a run folder are analyses
(`turnbon_graph.analysis`). The library (`turnbon_graph`) never imports it. The names
below are imported on first use."""

from turnbon_graph._exports import lazy_exports

__all__ = [
    "BenchConfig",
    "EpisodeResult",
    "RayOptions",
    "RegisteredEnvironment",
    "run_benchmark",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BenchConfig": "running.runner",
        "EpisodeResult": "running.runs",
        "RayOptions": "running.ray_runner",
        "RegisteredEnvironment": "running.workers_env",
        "run_benchmark": "running.runner",
    },
)
