"""The root group's commands, built only when looked up (start-up: ``roofline --help`` without every signature).

Typer builds a click command by reading its function's signature (``typer.main.get_command_from_info``: the
annotations evaluated, each parameter turned into a click one): about 3 ms a command, 0.15 s of the ~0.35 s
``roofline --help`` took with every command built up front, though the root's help shows only each command's name
and the first line of its help. The commands are registered on a Typer instance of their own
(``roofline.cli.app.commands``) and the root group (``roofline.cli.app.RooflineGroup``) asks this module:

* :func:`names`: every command's name, in registration order (commands, then sub-apps, as typer orders a group);
* :func:`listing_entry`: what the root's help panel reads of a command (name, help, short help, hidden,
  deprecated, its panel), built from what was registered exactly as typer builds those fields, no parameters;
* :func:`build`: the command itself, by typer's own builders (``get_command_from_info`` /
  ``get_group_from_info``), the first time it is invoked or its own help is asked for.

So every command, its options and its help are what typer builds (tests/test_cli_lazy_commands.py compares the
help of each with a group built eagerly).
"""

from __future__ import annotations

import inspect
from typing import Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, TyperInfo


def _infos(commands: typer.Typer) -> dict[str, CommandInfo | TyperInfo]:
    """name → registration, commands first, then the sub-apps (typer's order in a group)."""
    out: dict[str, CommandInfo | TyperInfo] = {}
    for info in commands.registered_commands:
        assert info.callback is not None
        out[info.name or typer.main.get_command_name(info.callback.__name__)] = info
    for group in commands.registered_groups:
        solved = typer.main.solve_typer_info_defaults(group)
        if solved.name:
            out[solved.name] = group
    return out


def names(commands: typer.Typer) -> list[str]:
    """Every command name registered on ``commands``, in typer's order."""
    return list(_infos(commands))


def listing_entry(commands: typer.Typer, name: str) -> TyperCommand | TyperGroup | None:
    """A parameterless stand-in of command ``name`` carrying the fields a help panel reads, as typer sets them."""
    info = _infos(commands).get(name)
    if info is None:
        return None
    if isinstance(info, CommandInfo):
        doc = inspect.getdoc(info.callback) if info.help is None else inspect.cleandoc(info.help)
        cls: type[TyperCommand] | type[TyperGroup] = TyperCommand
        fields = (doc, info.short_help, info.hidden, info.deprecated, info.rich_help_panel)
    else:
        solved = typer.main.solve_typer_info_defaults(info)
        cls, fields = (
            TyperGroup,
            (solved.help, solved.short_help, solved.hidden, solved.deprecated, solved.rich_help_panel),
        )
    doc, short, hidden, deprecated, panel = fields
    return cls(name=name, help=doc, short_help=short, hidden=hidden, deprecated=deprecated, rich_help_panel=panel)


def build(commands: typer.Typer, name: str, rich_markup_mode: Any) -> TyperCommand | TyperGroup | None:
    """Command ``name`` as typer builds it inside a group (None: no such command)."""
    info = _infos(commands).get(name)
    if info is None:
        return None
    if isinstance(info, CommandInfo):
        cmd = typer.main.get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=rich_markup_mode)
        assert isinstance(cmd, TyperCommand)
        return cmd
    kwargs: dict[str, Any] = {"pretty_exceptions_short": True, "rich_markup_mode": rich_markup_mode}
    if "suggest_commands" in inspect.signature(typer.main.get_group_from_info).parameters:
        kwargs["suggest_commands"] = True
    return typer.main.get_group_from_info(info, **kwargs)
