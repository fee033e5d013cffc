"""`python -m kestrel` is the `kestrel` command."""

from kestrel.cli.entry import main

main()
