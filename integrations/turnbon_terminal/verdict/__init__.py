"""The verdict: the task's tests run after the agent (`verifier`, and `watch` inside the
test process), what they say (`junit`, and Terminal-Bench 2's reward files: `reward`),
what the agent's code did to them (`tamper`), and the verifier's own pytest and bytecode
(`pytest_site`, `bytecode`)."""
