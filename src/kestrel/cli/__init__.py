"""Frontends for the terminal: the `kestrel` command."""
