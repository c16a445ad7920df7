"""``inturn completion bash|zsh``: a shell completion script for inturn."""

from __future__ import annotations

import argparse

from inturn_cli import completion


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``completion``."""
    parser = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script of every command, action, option and choice. Load it in the current "
        "shell with `source <(inturn completion bash)` (or zsh), or install it: `inturn completion bash > "
        '/etc/bash_completion.d/inturn`, `inturn completion zsh > "${fpath[1]}/_inturn"`.',
    )
    parser.add_argument("shell", metavar="SHELL", choices=["bash", "zsh"], help="the shell: bash or zsh")
    parser.set_defaults(handler=_print)


def _print(args: argparse.Namespace) -> int:
    from inturn_cli.main import build_parser  # the whole parser, as the user's shell will see it

    parser = build_parser()
    print(completion.bash(parser) if args.shell == "bash" else completion.zsh(parser), end="")
    return 0
