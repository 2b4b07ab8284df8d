"""The options both command lines take, and their refusals; an app adds its own (``App.add_options``)."""

from __future__ import annotations

import argparse
from typing import List, Optional

from .names import command_name
from .spec import App


def _positive(convert, what: str):
    """An argparse type: ``convert(text)``, more than 0."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
        return value

    return parse


positive_int = _positive(int, "a whole number")
positive_float = _positive(float, "a number")


def duration(text: str) -> float:
    """Seconds from ``900``, ``90s``, ``15m`` or ``2h``."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1].lower()]) if text and text[-1].lower() in units else (text, 1)
    try:
        value = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 900, 15m, 2h)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def build_parser(app: App) -> argparse.ArgumentParser:
    words = app.words
    config = f"configs/{app.entry_point}.yaml"
    parser = argparse.ArgumentParser(
        prog=command_name(app.entry_point, app.script),
        description=app.description,
        epilog=app.epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("goal", nargs="?", help=words.goal_help)
    parser.add_argument(
        "--model",
        help="the model: a name (gpt-4, gpt-4o-mini, ...) or provider/name; "
        f"default: each chat's model in the configuration ({config})",
    )
    parser.add_argument("--api-base", metavar="URL", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1")
    parser.add_argument("--config", metavar="FILE", help=f"the configuration (default: {config})")
    parser.add_argument(
        "--memory-dir", metavar="DIR", default="memory", help=f"where {words.memory_help} live (default: memory/)"
    )
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        help="the folder code runs in, where it reads your files and writes its own (default: the "
        "current folder; --demo: the memory folder)",
    )
    parser.add_argument(
        "--resume", action="store_true", help=f"run the last run in the memory folder again, to {words.resume_does}"
    )
    parser.add_argument(
        "--yes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"{words.yes_help} (--resume keeps the choice of the run it resumes; --no-yes asks again)",
    )
    parser.add_argument(
        "--mcp-config",
        metavar="FILE",
        help="offer the tools of the MCP servers FILE lists (Claude Desktop's or Cursor's "
        "mcpServers, VS Code's servers) as commands server__tool (or `mcp_config:` in the "
        "configuration); servers start when first needed and stop when the run ends",
    )
    if app.add_options:
        app.add_options(parser)
    parser.add_argument("--record", metavar="FILE", help="write every LLM exchange to a transcript (JSON lines)")
    parser.add_argument("--replay", metavar="FILE", help="answer every LLM call from a transcript instead of an LLM")
    parser.add_argument("--demo", action="store_true", help=words.demo_help)
    parser.add_argument("--trace", metavar="FILE", help="write every message between flows to FILE (JSON lines)")
    parser.add_argument(
        "--report",
        metavar="FILE",
        help=f"write the run report (HTML) to FILE instead of {app.report_name} in the memory folder",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="plain text on a terminal too: no colours, highlighting, status line or fitted lines "
        "(what a pipe or a file always gets)",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="show long replies as they are written (OpenAI-compatible servers stream anyway, "
        "and the status line counts their tokens; with this, replies through litellm stream "
        "too)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show aiflows' log, full tracebacks and how each LLM server's replies are waited for",
    )
    limits = parser.add_argument_group(
        "budget",
        "reaching a limit stops the run, and --resume goes on (the defaults are the\nconfiguration's `budget:`)",
    )
    limits.add_argument("--max-calls", type=positive_int, metavar="N", help="stop after N LLM calls")
    limits.add_argument("--max-tokens", type=positive_int, metavar="N", help="stop after N tokens (prompt + reply)")
    limits.add_argument(
        "--max-cost",
        type=positive_float,
        metavar="USD",
        help="stop after this many dollars (models with a known price; others count tokens only)",
    )
    limits.add_argument("--max-time", type=duration, metavar="TIME", help="stop after this long (e.g. 900, 15m, 2h)")
    model = parser.add_argument_group("the model's limits and replies")
    model.add_argument(
        "--context-window",
        type=positive_int,
        metavar="N",
        help="the model's context window in tokens (default: what the server says when asked, "
        "else litellm's model map; llama-cpp-python's server: its --n_ctx)",
    )
    model.add_argument(
        "--structured-output",
        choices=("auto", "json_schema", "json_object", "off"),
        help="the response_format controllers ask for (default auto: what the server accepts)",
    )
    return parser


def parse_args(app: App, argv: Optional[List[str]]) -> argparse.Namespace:
    """The options of ``app``'s command line; exits (as argparse does, code 2) on what does not go together."""
    parser = build_parser(app)
    args = parser.parse_args(argv)
    if args.demo and (args.replay or args.record or args.resume):
        parser.error("--demo replays its own recording; it does not go with --replay, --record or --resume")
    if args.demo and args.goal:
        parser.error("--demo replays a recording made for its own goal; drop the goal (or drop --demo)")
    if args.replay and args.record:
        parser.error("--record and --replay do not go together")
    recorded = ("--model",) + app.replayed + ("--mcp-config", "--api-base")
    if (args.demo or args.replay) and any(getattr(args, option[2:].replace("-", "_")) for option in recorded):
        parser.error(
            f"--demo and --replay answer from a recording: {', '.join(recorded[:-1])} and {recorded[-1]} do not apply"
        )
    if app.check_options:
        app.check_options(parser, args)
    if args.goal is not None and not args.goal.strip():
        args.goal = None  # a goal of blanks is no goal
    if not args.goal and not (args.resume or args.demo or args.replay):
        parser.error(f'give a goal, e.g. {parser.prog} "{app.words.goal_example}" (or --resume, --demo)')
    return args
