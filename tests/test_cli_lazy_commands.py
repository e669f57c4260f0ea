"""The root group builds a command only when it is looked up; its help and every command's are typer's own."""

from __future__ import annotations

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from roofline.cli import lazy_commands
from roofline.cli.app import app, commands

runner = CliRunner()


def _eager() -> typer.Typer:
    """The same root, every command registered on it directly: typer builds them all up front."""
    eager = typer.Typer(
        name="roofline",
        help=app.info.help,
        no_args_is_help=True,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    eager.registered_callback = app.registered_callback
    eager.registered_commands = list(commands.registered_commands)
    eager.registered_groups = list(commands.registered_groups)
    return eager


@pytest.mark.parametrize("args", [["--help"], [], ["bogus"]])
def test_the_root_help_and_errors_match_an_eagerly_built_group(args: list[str]) -> None:
    lazy = runner.invoke(app, args, env={"COLUMNS": "120"})
    eager = runner.invoke(_eager(), args, env={"COLUMNS": "120"})
    assert lazy.exit_code == eager.exit_code
    assert lazy.output == eager.output
    assert ("predict" in lazy.output) == (args != ["bogus"])  # an unknown command: the error, not the listing


@pytest.mark.parametrize("name", lazy_commands.names(commands))
def test_each_commands_help_matches_the_eager_build(name: str) -> None:
    lazy = runner.invoke(app, [name, "--help"], env={"COLUMNS": "120"})
    eager = runner.invoke(_eager(), [name, "--help"], env={"COLUMNS": "120"})
    assert lazy.exit_code == eager.exit_code == 0
    assert lazy.output == eager.output


def test_the_root_help_builds_no_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing reads what was registered: typer's command builder is not called (the ~0.15 s saved)."""
    calls: list[str] = []
    real = typer.main.get_command_from_info

    def counting(info: typer.models.CommandInfo, **kwargs: object) -> object:
        calls.append(str(info.name))
        return real(info, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(typer.main, "get_command_from_info", counting)
    assert runner.invoke(app, ["--help"]).exit_code == 0
    assert calls == []
    assert runner.invoke(app, ["clients", "--help"]).exit_code == 0
    assert calls == ["clients"]  # a command is built when it is used
