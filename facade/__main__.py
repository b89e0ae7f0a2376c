"""``python -m fermix_memory``: the ``fermix`` command."""

from fermix_memory.entrypoints.cli import run

if __name__ == "__main__":
    run()
