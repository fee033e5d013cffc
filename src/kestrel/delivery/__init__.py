"""Delivering a session's change: a branch pushed to the remote, a pull request opened on the
forge with the session's trace, and review comments turned into follow-ups."""
