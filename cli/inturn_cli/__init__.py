"""The ``inturn`` command line: one entry point, one subcommand per routine task."""
