"""The context engine: which code a task is about, found fast and served fresh."""
