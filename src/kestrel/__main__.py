"""`python -m kestrel` is the `kestrel` command."""

from kestrel.cli.main import main

main()
