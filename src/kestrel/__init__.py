"""Kestrel: an autonomous coding agent."""
