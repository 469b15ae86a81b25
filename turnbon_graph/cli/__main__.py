"""`python -m turnbon_graph.cli`: the `turnbon` command."""

from __future__ import annotations

import sys

from turnbon_graph.cli.main import main

sys.exit(main())
