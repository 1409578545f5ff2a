"""The Python API (`sxctl.api`, docs/api.md): the guide's examples run and print what they say,
each command is one call of the API, and the API's names stay callable."""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile

import sxctl.api
from tests.conftest import REPO


def test_api_guide_examples_run_and_print_what_they_say(project, tmp_path, monkeypatch):
    from tests.conftest import Agent

    guide = (REPO / "docs" / "api.md").read_text()
    pairs = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", guide, re.S)
    examples = "".join(code for code, _ in pairs)
    functions = set(_command_table(guide).values())
    # every function of the API is called by an example run here
    assert {name for name in functions if not re.search(rf"\b{name}\(", examples)} == set()
    agent = Agent(project, "--turn-seconds", "0.1")
    os.chdir(project.root)  # the hermetic fixture puts the working folder back
    scratch = tmp_path / "temp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # an example that leaves a folder behind is a bad example
    try:
        for code, expected in pairs:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, "docs/api.md", "exec"), {})
            assert out.getvalue() == expected, f"{code}\nprinted:\n{out.getvalue()}"
    finally:
        agent.stop()
    assert os.listdir(scratch) == []


def _command_table(guide: str) -> dict[str, str]:
    """docs/api.md's table: every command (aliases split) -> the API function it calls."""
    table = {}
    for commands, function in re.findall(r"^\| (`[^|]+`) \| `(\w+)\(", guide, re.M):
        words = re.findall(r"`([^`]+)`", commands)
        group = words[0].rsplit(" ", 1)[0] if " " in words[0] else ""
        for word in words:
            table[word if " " in word or not group else f"{group} {word}"] = function
    return table


def _leaf_commands():
    import click

    from sxctl.cli.root import cli

    def walk(group, prefix):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                yield from walk(command, [*prefix, name])
            else:
                yield " ".join([*prefix, name]), command

    return dict(walk(cli, []))


def test_every_command_calls_exactly_one_api_function_and_the_guide_names_it():
    """The CLI is parse, call one use case, render: the command's callback (with the private
    helpers of its module it calls) imports exactly one function of sxctl.api, the one the
    guide's table names for it."""
    import inspect

    table = _command_table((REPO / "docs" / "api.md").read_text())
    for path, command in _leaf_commands().items():
        if path == "demo":  # a client of the command line itself (it runs `python -m sxctl`), not of the API
            continue
        if path.startswith("cb "):
            path = "callbacks " + path[3:]
        module = inspect.getmodule(command.callback)
        source = inspect.getsource(command.callback)
        for helper in set(re.findall(r"\b(_\w+)\(", source)):
            if inspect.isfunction(getattr(module, helper, None)):
                source += inspect.getsource(getattr(module, helper))
        called = set(re.findall(r"from \.\.api import (\w+)", source))  # a function-level import
        api_names = {id(getattr(sxctl.api, name)): name for name in sxctl.api.__all__
                     if inspect.isfunction(getattr(sxctl.api, name))}
        called |= {api_names[id(getattr(module, word))] for word in re.findall(r"\b(\w+)\(", source)
                   if id(getattr(module, word, None)) in api_names}  # a module-top import, under any name
        assert len(called) == 1, (path, called)
        [function] = called
        assert function in sxctl.api.__all__
        assert table.get(path) == function, (path, function, table.get(path))


def test_no_module_of_the_package_shadows_a_function_of_the_api():
    """`import sxctl.<module>` sets that attribute on the package: a module named like an API
    function (there was `sxctl/doctor.py`) turned `sxctl.doctor()` into "'module' object is not
    callable" once anything had imported it."""
    import importlib
    import pkgutil

    import sxctl

    modules = {info.name for info in pkgutil.iter_modules(sxctl.__path__)}
    assert modules & set(sxctl.__all__) == set()
    for name in modules - {"__main__"}:
        importlib.import_module(f"sxctl.{name}")
    assert all(callable(getattr(sxctl, name)) for name in sxctl.__all__ if name != "__version__")
