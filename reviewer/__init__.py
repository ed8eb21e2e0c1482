"""reviewer: an approval gate between an AI agent's dry run and its real writes."""

DISTRIBUTION = "reviewer-gate"
"""The name the project is installed under (`pip install reviewer-gate`)."""


def release() -> str:
    """The installed release's version (`reviewer --version`, `/healthz`, `serve`'s first line); `unknown`
    where the project runs from a source tree that was never installed. Read on demand: the package
    metadata is not loaded by commands that do not ask."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
