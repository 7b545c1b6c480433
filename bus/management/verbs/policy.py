"""policy: a project's policy for requests from other projects — check it, or explain
what it decides for one request (bus.policy has the rules, bus.services.requests reads
the file)."""

from __future__ import annotations

import os

from bus.management.verbs import formats, types
from bus.management.verbs.base import Output, Verb, add_json_flag


class Policy(Verb):
    name = "policy"
    summary = "check a project's policy for requests, or explain a verdict"
    help = (
        "A project answers other projects' requests by its own .agent-salon/policy.toml. "
        "`check [DIR]` lints it (DIR: the project's root, or the file; default the current "
        "directory): one line per problem with its line number, exit 1 if there is any. "
        "`explain AGENT KEY [--as WRITER]` prints what AGENT's policy decides for a request "
        "with ask key KEY from WRITER (default: this agent, a writer on this machine), and "
        "why; nothing is run."
    )
    speaks_for_a_seat = False

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="check|explain")
        check = actions.add_parser(
            "check",
            help="lint a policy file",
            description="Lint DIR's .agent-salon/policy.toml (or the file DIR names): one "
            "line per problem, exit 1 if there is any, 0 when it is clean.",
        )
        check.add_argument(
            "dir", nargs="?", default=".", metavar="DIR", help="the project (default: here)"
        )
        add_json_flag(check)
        explain = actions.add_parser(
            "explain",
            help="what an agent's policy decides for one request",
            description="Print the verdict (serve, gate, wake or deny) and the reason the "
            "asker would be shown, and for serve the command that would run; nothing is run.",
        )
        explain.add_argument("agent", type=types.agent_arg, metavar="AGENT", help="who is asked")
        explain.add_argument("key", metavar="KEY", help="the ask key, e.g. status:db")
        explain.add_argument(
            "--as",
            dest="writer",
            type=types.sender_arg,
            metavar="WRITER",
            help="who asks: agent, agent#session, or agent@device#session for a remote one",
        )
        add_json_flag(explain)

    def arguments(self, options):
        if options.action == "check":
            # The server that answers may run elsewhere: the path goes whole.
            return {"action": "check", "path": os.path.abspath(options.dir)}
        return {
            "action": "explain",
            "agent": options.agent,
            "key": options.key,
            "writer": options.writer,
        }

    def show(self, result, options, out: Output) -> int:
        if options.action == "check":
            return self.show_check(result, options, out)
        if options.json:
            out.emit_json(result)
        else:
            out.say(format_explained(result))
        return 0

    def show_check(self, result, options, out: Output) -> int:
        problems = result["problems"]
        if options.json:
            out.emit_json(result)
        elif not problems:
            grants = formats.plural(result["grants"], "grant")
            out.say(f"{result['file']}: {grants}, no problems")
        else:
            for problem in problems:
                line = problem["line"]
                out.say(f"{result['file']}{f':{line}' if line else ''}: {problem['text']}")
        return 1 if problems else 0


def format_explained(result: dict) -> str:
    import shlex  # here: only this command quotes a command line

    lines = [f"{result['verdict']}: {result['reason']}"]
    if result["argv"] is not None:
        lines.append(f"  would run: {shlex.join(result['argv'])}")
        lines.append(f"  in {result['root']} (nothing was run)")
    if result["line"]:
        lines.append(f"  the grant: {result['policyFile']}, line {result['line']}")
    if result["root"] is None:
        lines.append(
            f"  no project directory is recorded for {result['agent']}: `salon install` "
            "there, or a session start there, records it"
        )
    elif not result["policyFound"]:
        lines.append(f"  there is no {result['policyFile']}")
    return "\n".join(lines)


VERBS = [Policy()]
