"""The one exception type for user mistakes; the CLI prints it as a single line."""


class LiteNetError(Exception):
    """A problem the user can fix (bad path, bad file, bad option); never an internal bug."""
