"""`turnbon report`: a run folder as a Markdown report (`writer`) with the paper's
sections (`sections`, `split`, `spend`, `pairs`, `strategies`), its figures (`plots`,
`strategy_plots`), an HTML page (`html`), and numbers formatted one way (`format`).

The names of the earlier `turnbon_graph.bench.report` module are here too, so that path
keeps working."""

from turnbon_graph._exports import lazy_exports

__all__ = [
    "REPORT_DIR",
    "REPORT_FILE",
    "Figures",
    "one_line_summary",
    "read_run",
    "read_settings",
    "render_report",
    "setting_order",
    "write_report",
]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "writer"))
