"""Value functions, which score a trajectory for the search strategies: the LLM rubric
(`value`), a process reward model (`prm`), the task's own tests as a labelled oracle
(`oracle`), and which one scores a run (`valuing`)."""
