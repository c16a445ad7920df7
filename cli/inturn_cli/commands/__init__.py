"""Subcommand modules: each defines ``register(subparsers)`` and sets ``handler`` on its parsers.

Service commands import their service lazily, inside the handler, so ``inturn --help`` stays fast.
"""
