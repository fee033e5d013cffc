"""The one way to drive a session: create, follow up, cancel, resume, rewind, answer approvals,
decide plans and reviews, apply, and subscribe to events from an offset.

No terminal and no HTTP here: frontends (the command line, the server) are clients of it, and
everything that waits on a person is an event any process can answer.
"""
