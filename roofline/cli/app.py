"""The ``roofline`` command line.

Exit codes: 0 success; 1 an infeasible request (does not fit, no plan meets the SLOs);
2 a usage error (unknown name, malformed or out-of-range value, bad spec file);
3 an internal error (a bug: rerun with ``--debug`` for the traceback).

Errors print one paragraph ``error: …`` on stderr and never a traceback unless the
global ``--debug`` option is given. Start-up stays light: this module and the command
modules import only typer and the standard library; numpy, pandas, pydantic and rich
are imported inside the commands.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup, TyperOption

from roofline import __version__
from roofline.cli import lazy_commands, lazy_help
from roofline.cli.options import as_flags
from roofline.errors import RooflineError

lazy_help.install()  # help and usage errors render without importing markdown-it (roofline.cli.lazy_help)

EXIT_INTERNAL = 3
_TYPE_LABEL = TyperOption.display_type_rich


def _flag_has_no_type(self: TyperOption, ctx: Any) -> str | None:
    """Help shows ``--ops`` rather than ``--ops <bool>``: flags take no value, so they get no type label."""
    if self.is_flag or self.count:
        return None
    return _TYPE_LABEL(self, ctx)


TyperOption.display_type_rich = _flag_has_no_type  # type: ignore[method-assign]


class RooflineGroup(TyperGroup):
    """Root group: turns exceptions raised by any command into ``error: …`` and an exit code, and builds each
    command only when it is looked up (:mod:`roofline.cli.lazy_commands`): the root's own help lists them from
    what was registered, without typer reading every command's signature (~0.15 s of ``roofline --help``)."""

    listing = False  # set while the root's help is rendered: look-ups then return the commands' help stand-ins

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [*super().list_commands(ctx), *(n for n in lazy_commands.names(commands) if n not in self.commands)]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:  # type: ignore[override]
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        if self.listing:
            return lazy_commands.listing_entry(commands, cmd_name)
        built = lazy_commands.build(commands, cmd_name, self.rich_markup_mode)
        if built is not None:
            self.commands[cmd_name] = built
        return built

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # click's own usage errors and exits
        except KeyboardInterrupt:
            if ctx.params.get("debug"):
                raise
            print_error("interrupted (Ctrl-C); nothing was written unless a message above says so")
            raise typer.Exit(130) from None
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            code, message = describe_error(exc)
            print_error(message)
            raise typer.Exit(code) from None


def describe_error(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-paragraph message) for an exception raised by a command, phrased for the CLI."""
    if isinstance(exc, RooflineError):
        return exc.exit_code, as_flags(str(exc))
    try:
        from pydantic import ValidationError
    except ImportError:  # pragma: no cover - pydantic is a dependency
        ValidationError = ()  # type: ignore[assignment,misc]
    if isinstance(exc, ValidationError):
        errs = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:3])
        return 2, f"invalid value: {errs}"
    if isinstance(exc, ValueError):
        return 2, str(exc)
    if isinstance(exc, OSError):
        return 2, f"{exc.filename or 'file'}: {exc.strerror or exc}"
    return EXIT_INTERNAL, (
        f"internal error {type(exc).__name__}: {exc}. This is a bug in roofline; "
        "rerun with --debug for the traceback and report it"
    )


def print_error(message: str) -> None:
    """``error: message`` on stderr (red on a terminal)."""
    text = f"error: {message}"
    if sys.stderr.isatty():
        typer.secho(text, err=True, fg="red")
    else:
        typer.echo(text, err=True)


app = typer.Typer(
    cls=RooflineGroup,
    name="roofline",
    help="Analytical LLM-inference performance model: latency, throughput, memory and capacity plans.\n\n"
    "Sizes: 2k = 2000 tokens; durations: 500ms, 0.5s. Memory sizes print in GiB (2^30 bytes); "
    "rates in decimal units (TB/s).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"roofline {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Analytical LLM-inference performance model: latency, throughput, memory and capacity plans."""


#: The commands the root group builds on demand (:class:`RooflineGroup`); registered by :func:`_register`.
commands = typer.Typer()


def _register() -> None:
    from roofline.cli.calibrate import calibrate_app
    from roofline.cli.library import hardware_app, model_app, schema_cmd
    from roofline.cli.plan import plan_cmd
    from roofline.cli.predict import compare_cmd, predict_cmd
    from roofline.cli.report import report_command
    from roofline.cli.simulate import clients_cmd, simulate_cmd
    from roofline.cli.simulate_ext import plan_disagg_cmd, simulate_disagg_cmd
    from roofline.cli.spec_plan import spec_plan_cmd
    from roofline.cli.sweep import sweep_cmd
    from roofline.cli.validation import accuracy_command, validate_command

    commands.command("predict", no_args_is_help=True)(predict_cmd)
    commands.command("sweep", no_args_is_help=True)(sweep_cmd)
    commands.command("compare", no_args_is_help=True)(compare_cmd)
    commands.command("plan", no_args_is_help=True)(plan_cmd)
    commands.command("simulate", no_args_is_help=True)(simulate_cmd)
    commands.command("clients")(clients_cmd)
    commands.command("spec-plan", no_args_is_help=True)(spec_plan_cmd)
    commands.command("simulate-disagg", no_args_is_help=True)(simulate_disagg_cmd)
    commands.command("plan-disagg", no_args_is_help=True)(plan_disagg_cmd)
    commands.add_typer(hardware_app, name="hardware")
    commands.add_typer(model_app, name="model")
    commands.command("schema", no_args_is_help=True)(schema_cmd)
    commands.add_typer(calibrate_app, name="calibrate")
    commands.command("report")(report_command)
    commands.command("validate")(validate_command)
    commands.command("accuracy")(accuracy_command)


_register()


def hoist_debug(argv: list[str]) -> list[str]:
    """Move ``--debug`` given after a command (``roofline predict … --debug``) to the front, where the
    root group reads it; arguments after ``--`` are left alone."""
    end = argv.index("--") if "--" in argv else len(argv)
    if "--debug" not in argv[:end]:
        return argv
    rest = [a for i, a in enumerate(argv) if not (a == "--debug" and i < end)]
    return ["--debug", *rest]


def main() -> None:
    """Console entry point: run the app; a last guard keeps tracebacks away from users."""
    try:
        app(args=hoist_debug(sys.argv[1:]))
    except RooflineError as exc:  # raised outside a command (e.g. while parsing)
        if "--debug" in sys.argv:
            raise
        print_error(as_flags(str(exc)))
        sys.exit(exc.exit_code)
    except Exception as exc:
        if "--debug" in sys.argv:
            raise
        code, message = describe_error(exc)
        print_error(message)
        sys.exit(code)


if __name__ == "__main__":
    main()
