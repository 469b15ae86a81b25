"""`turnbon serve`: the command (`command`), its own flags declared once (`options`), the
response store's settings (`store`) and the `--model stub` stand-in (`stub`)."""

from turnbon_graph.cli.serve.command import add_parser, run, serve_arguments, serve_config
from turnbon_graph.cli.serve.options import SETTINGS

__all__ = ["SETTINGS", "add_parser", "run", "serve_arguments", "serve_config"]
