"""The full-screen terminal UI: one more client of the session service."""
