"""The one exception type for mistakes a user can fix: the CLI prints it as one line, never a traceback."""


class UserError(Exception):
    """Bad input or set-up; the message names what to fix."""
