"""`kestrel serve`: the multi-tenant HTTP API and the parts it is built from."""
