"""The evaluation harness: the environment protocol, run folders, the runner, metrics,
the report and its plots. The library (`turnbon_graph`) never imports it."""
