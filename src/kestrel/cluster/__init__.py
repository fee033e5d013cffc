"""Cluster mode: sessions run by any number of stateless workers on a durable engine.

A session's run is a DBOS workflow on one queue in PostgreSQL (`engine`); any `kestrel worker`
process takes the next one (`worker`), and when a worker dies the survivors notice it and take
over its runs (`liveness`). The durable record of each model call and tool call is the session's
event log, also in PostgreSQL: a run taken over resumes from its last logged step, exactly as
`kestrel resume` does after a crash, so nothing recorded runs twice (`runs`). Servers only put
runs on the queue (`submit`).
"""
