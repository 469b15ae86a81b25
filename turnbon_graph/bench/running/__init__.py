"""Running a benchmark: the plan of a run (`plan`: settings, episodes, what is left to
do), `turnbon bench` itself (`runner`), here (`local_runner`) or on Ray (`ray_runner`,
with cluster-wide `limits`), the run folder (`runs`) and the progress bar (`progress`)."""
