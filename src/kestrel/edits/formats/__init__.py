"""Parsers from each edit format a model emits to the engine's steps."""
