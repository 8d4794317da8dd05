"""CLI commands (filled in by its issue)."""


def register(app):
    pass
