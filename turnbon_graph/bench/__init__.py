"""The evaluation harness: the environment protocol (environment) and the environments
installed packages register (registry), the episode driver (episode), run folders (runs),
the runner (runner), metrics, the report and its plots, and the judge's and the branch
rollouts' runs over a run folder (judging, branching). The library (`turnbon_graph`)
never imports it."""
