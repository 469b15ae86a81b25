"""The container engine: Podman or Docker through its command line (`engine`), the image
an episode runs (`images`), one container per episode (`instance`), a command in it
(`command`), the agent's shell session there (`session`) and its tool (`session_tool`),
its storage (`volumes`), forks (`fork`), an episode there (`episode`), and the sweep of
what dead runs left (`owners`).

The names of the earlier `turnbon_terminal.container` module are here too, so that path
keeps working."""

from turnbon_graph._exports import lazy_exports

__all__ = ["DEFAULT_IMAGE", "VERIFIER_LOGS", "Container", "ContainerHost"]

__getattr__, __dir__ = lazy_exports(__name__, {name: "instance" for name in __all__})
