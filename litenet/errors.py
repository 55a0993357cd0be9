"""The exception types for user mistakes; the CLI prints them as a single line."""


class LiteNetError(Exception):
    """A problem the user can fix (bad path, bad file, bad option); never an internal bug. Exit status 1."""


class UsageError(LiteNetError):
    """A setting or flag outside what it allows (named, with the allowed range); exit status 2, as argparse's."""
