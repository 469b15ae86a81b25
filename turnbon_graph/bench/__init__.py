"""The evaluation harness: the environment protocol (environment) and the environments
installed packages register (registry), the episode driver (episode), run folders (runs),
the runner (runner, which runs a bench here with local_runner or on Ray with ray_runner;
both plan and record the run with plan, run each episode with attempt and show progress),
metrics, the report and its plots. The judge's and the branch rollouts' runs over a run
folder are analyses (`turnbon_graph.analysis`). The library (`turnbon_graph`) never
imports it."""
