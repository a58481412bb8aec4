"""Exceptions raised for input a user must fix."""


class InputError(ValueError):
    """The input data or parameters cannot be analysed; the message says what to change."""
