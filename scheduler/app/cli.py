"""The `curriculum` command. Only this module prints.

Exit codes: 0 success, 2 bad input (a CurriculumError: manifest, config, flag, checkpoint),
1 an unexpected error (one line, and --debug for the traceback).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from domains import CurriculumError, ManifestError

from .._redact import RedactingFilter, mask_secrets

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT = 0, 1, 2


class _Console:
    """A rich Console, made when first used: rich is a tenth of a second of imports that
    `curriculum validate` would otherwise pay before reading a file."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def get(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # soft_wrap: a line is never broken (at 80 columns when not a terminal):
            # `file:line:col: field: message` stays one line that tools and grep can read.
            self._console = Console(stderr=self._stderr, highlight=False, soft_wrap=True)
        return self._console

    def print(self, *objects: Any, **options: Any) -> None:
        self.get().print(*objects, **options)

    def line(self, text: str) -> None:
        """One line as it is (no markup, no emoji codes, never wrapped), without rich."""
        stream = sys.stderr if self._stderr else sys.stdout
        stream.write(text + "\n")
        stream.flush()


out = _Console(stderr=False)
err = _Console(stderr=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # bad flags: a clear message and exit code 2
        self.print_usage(sys.stderr)
        err.line(f"{self.prog}: error: {message}")
        raise SystemExit(EXIT_BAD_INPUT)

    def format_help(self) -> str:
        _fill_help(self)
        return super().format_help()


_POLICIES, _DEFAULT = "{policies}", "{default}"


def _fill_help(parser: argparse.ArgumentParser) -> None:
    """Put the policy names and the settings' defaults into ``{policies}`` and
    ``{default}`` (of the flag's own setting) when help is shown: reading them imports the
    policies (scipy) and Settings (pydantic-settings, the scheduler), which `curriculum
    validate` has no use for."""
    texts = [parser.description or "", *(a.help or "" for a in parser._actions)]
    if not any(_POLICIES in t or _DEFAULT in t for t in texts):
        return
    from policies import available_policies

    from ._settings import Settings

    policies = ", ".join(available_policies())

    def fill(text: str, dest: str) -> str:
        text = text.replace(_POLICIES, policies)
        if _DEFAULT in text:
            default = Settings.model_fields[dest].get_default(call_default_factory=True)
            text = text.replace(_DEFAULT, str(default))
        return text

    parser.description = fill(parser.description or "", "") or None
    for action in parser._actions:
        if action.help:
            action.help = fill(action.help, action.dest)


def _cmd_validate(args: argparse.Namespace) -> int:
    from domains import build_catalog, load_manifests, thin_probe_notes

    from ._sources import ManifestSettings  # not Settings: no scheduler to import

    sources = ManifestSettings.load_manifest_settings(args.config).source_policy()
    try:
        manifests = load_manifests(*args.paths, sources=sources)
        catalog = build_catalog(manifests)
    except ManifestError as exc:
        files = {p.file for p in exc.problems}
        for problem in exc.problems:
            err.line(str(problem))
        err.line(f"{len(exc.problems)} problem(s) in {len(files)} file(s)")
        return EXIT_BAD_INPUT
    s = catalog.summary()
    out.line(
        f"ok: {len(catalog.sources)} file(s), {s['domains']} domains, {s['families']} families, "
        f"{s['arms']} arms (family x tier), {s['variants']} variants, "
        f"{s['probe_items']} probe items"
    )
    out.line(
        f"quotas feasible: sum of min_share {s['min_share_sum']:.3f} <= 1 <= "
        f"sum of max_share {s['max_share_sum']:.3f}"
    )
    notes = thin_probe_notes(manifests)
    for note in notes:
        err.line(f"note: {note}")
    if notes:
        err.line(f"{len(notes)} note(s): the manifests load, but see above")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from domains import manifest_json_schema

    sys.stdout.write(json.dumps(manifest_json_schema(), indent=2) + "\n")
    return EXIT_OK


def _cmd_simulate(args: argparse.Namespace) -> int:
    from ._main_job import main_job, settings_from_args

    if args.show_settings:
        import yaml

        settings = settings_from_args(args).model_dump(mode="json")
        sys.stdout.write(yaml.safe_dump(settings, sort_keys=False))
        return EXIT_OK
    return main_job(args, out.get(), err.get())


def _cmd_report(args: argparse.Namespace) -> int:
    from ._report import print_report

    return print_report(args.db, args.run, out.get(), limit=args.events)


def _cmd_ui(args: argparse.Namespace) -> int:
    from .._redact import mask_url
    from ..tracking import start_ui_server
    from ._settings import Settings

    uri = args.tracking_uri or Settings.load(args.config).tracking_uri
    # SIGTERM and SIGHUP (kill PID, a closed terminal) stop it as Ctrl-C does: the server's
    # whole process group goes, and its log with it. SIGINT is handled here too: Python
    # leaves it ignored where the parent ignored it (a job started with `&` by a script).
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _raise_stop)
    try:
        server = start_ui_server(uri, port=args.port)
        try:
            out.print(f"MLflow UI for {mask_url(uri)}: {server.url}  (Ctrl-C to stop)")
            server.process.wait()
        finally:
            server.stop()
    except (KeyboardInterrupt, _Stop):
        pass
    return EXIT_OK


class _Stop(Exception):
    """A termination signal, turned into an exception so that `finally` blocks run."""


def _raise_stop(signum: int, frame: object) -> None:
    signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    raise _Stop(signum)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="curriculum", description="Curriculum scheduler for RL post-training.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.set_defaults(subparsers=sub.choices)

    p = sub.add_parser("validate", help="check domain manifests and print a summary")
    p.add_argument("paths", nargs="+", help="manifest files, directories or globs")
    p.add_argument("--config", help="settings YAML (which data files manifests may read)")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("schema", help="print the JSON Schema of a manifest file")
    p.set_defaults(func=_cmd_schema)

    p = sub.add_parser(
        "simulate",
        help="run the scheduler on the simulated learner",
        description="The main job: the scheduler drives the built-in simulated learner, "
        "beside a baseline policy and the fixed mix, and records both runs to the store "
        "and MLflow. Policies: {policies}. A flag overrides CURRICULUM_* variables, which "
        "override the config file.",
    )
    p.add_argument("--config", help="settings YAML (default: configs/scheduler.yaml if present)")
    p.add_argument("--steps", type=int, help="training steps (default {default})")
    p.add_argument("--seed", type=int, help="seed of the scheduler and the learner (default 0)")
    p.add_argument("--policy", help="policy: one of {policies} (default {default})")
    p.add_argument("--baseline", help="policy to compare against (default {default})")
    p.add_argument(
        "--batch-size",
        type=int,
        dest="batch_size",
        help="episodes per step (default {default})",
    )
    p.add_argument("--domains", nargs="+", help="manifest paths (default: configs/domains)")
    p.add_argument("--db", help="store URL (default {default})")
    p.add_argument(
        "--tracking-uri",
        dest="tracking_uri",
        help="MLflow tracking URI (default {default})",
    )
    p.add_argument(
        "--run-name", dest="run_name", help="name of the run in the store (default sim-DATE)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run (--run-name, or the latest) from its checkpoint, to its own "
        "target or to --steps",
    )
    p.add_argument(
        "--no-baseline", action="store_true", help="skip the baseline run and the fixed mix"
    )
    p.add_argument("--no-store", action="store_true", help="do not write the run to the store")
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--show-settings",
        action="store_true",
        help="print every effective setting (defaults, file, environment, flags) and exit",
    )
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("report", help="summarise a run read back from the store")
    p.add_argument("run", nargs="?", help="run name (default: the latest run)")
    p.add_argument("--db", default=None, help="store URL (default from settings)")
    p.add_argument("--events", type=int, default=20, help="how many recent events to show")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("ui", help="start the MLflow UI on the run's tracking store")
    p.add_argument(
        "--tracking-uri", dest="tracking_uri", help="MLflow tracking store (default from settings)"
    )
    p.add_argument("--config", help="settings YAML (default: configs/scheduler.yaml if present)")
    p.add_argument("--port", type=int, default=5000, help="port on 127.0.0.1 (0: any free one)")
    p.set_defaults(func=_cmd_ui)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the subcommand's own usage, not the top level's
        owner = args.subparsers.get(args.command, parser)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # no log line shows a password
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    try:
        code: int = args.func(args)
    except CurriculumError as exc:
        err.line(f"error: {mask_secrets(str(exc))}")  # one line: never split file:line
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as exc:
        if args.debug:
            raise
        err.print(
            f"error: unexpected {type(exc).__name__}: {mask_secrets(str(exc))} "
            "(run with --debug for the traceback)",
            markup=False,
        )
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    raise SystemExit(main())
