"""``python -m attnflow.cli ARGS``: the ``attnflow`` command."""

from . import main

main()
