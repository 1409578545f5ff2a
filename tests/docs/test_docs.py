"""Documentation that cannot go stale: man pages, completions, the CLI reference, the generated
examples, the API guide, the protocol pointers, and what the wheel installs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_man_pages_completions_and_reference_are_up_to_date():
    result = subprocess.run([sys.executable, str(REPO / "tools" / "gen_docs.py"), "--check"], capture_output=True,
                            text=True, cwd=REPO)
    assert result.returncode == 0, f"run `python tools/gen_docs.py`:\n{result.stdout}{result.stderr}"


def test_the_generated_examples_are_up_to_date_and_the_readme_is_a_front_door():
    """The example output in the Markdown files comes from running the commands (cog blocks,
    tools/examples.py); the README stays short, with its two set-up commands first."""
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import gen_docs
    finally:
        sys.path.remove(str(REPO / "tools"))
    shown = gen_docs.with_examples()
    assert REPO / "README.md" in shown and REPO / "docs" / "reference" / "json-and-exit-codes.md" in shown
    stale = [str(path.relative_to(REPO)) for path, text in shown.items() if path.read_text() != text]
    assert stale == [], f"run `python tools/gen_docs.py`: {stale}"
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < 180  # the set-up, one example, the policies, the comparison and speed tables
    setup = readme.split("## Set up\n", 1)[1]
    assert setup.lstrip().startswith("```sh\n") and "```console" in readme.split("## Set up\n", 1)[1]
    assert not re.search(r"\d+ tests|about \d+ seconds", readme)  # counts and timings go stale


@pytest.mark.real_time
def test_every_group_has_a_man_page_that_renders_cleanly():
    import click

    from sxctl.cli.root import cli

    ctx = click.Context(cli)
    commands = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    groups = {name for name, command in commands.items() if isinstance(command, click.Group) and name != "cb"}
    pages = {p.name for p in (REPO / "man").glob("*.1")}
    assert pages == {"sxctl.1", *(f"sxctl-{g}.1" for g in groups)}
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed")
    for page in sorted(pages):
        result = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", str(REPO / "man" / page)],
                                capture_output=True, text=True)
        assert result.returncode == 0 and result.stderr == "", (page, result.stderr)
    if shutil.which("man"):
        shown = subprocess.run(["man", "-l", str(REPO / "man" / "sxctl-inbox.1")], capture_output=True, text=True,
                               env={**os.environ, "MANPAGER": "cat", "PAGER": "cat"})
        assert shown.returncode == 0 and "sxctl inbox send" in shown.stdout


def test_cli_reference_lists_every_command():
    import click

    from sxctl.cli.root import cli

    reference = (REPO / "docs" / "cli.md").read_text()
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        if cli.get_command(ctx, name).name == name:
            assert f"## sxctl {name}\n" in reference
    assert "## sxctl inbox send\n" in reference and "## sxctl cron tick\n" in reference


@pytest.fixture
def sxctl_on_path(tmp_path):
    """An `sxctl` executable on PATH, as `pip install` would provide."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "sxctl"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m sxctl \"$@\"\n")
    wrapper.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.parametrize(("line", "expected"), [("sxctl in", ["inbox"]), ("sxctl inbox s", ["send", "show"]),
                                                ("sxctl inbox se", ["send"]), ("sxctl cron ti", ["tick"])])
def test_bash_completion_in_a_clean_bash(sxctl_on_path, line, expected):
    words = line.split(" ")
    script = (f"source {REPO / 'completions' / 'sxctl.bash'}\n"
              f"COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}\n"
              "_sxctl_completion sxctl\n"
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True,
                            env={"PATH": sxctl_on_path, "HOME": os.environ.get("HOME", "/")}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == expected  # `inbox s` offers send and its sibling show


@pytest.mark.slow
def test_the_wheel_installs_man_pages_and_completions(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True)
    [wheel] = tmp_path.glob("sxctl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "sxctl-0.1.0.data/data/share/"
    for page in (REPO / "man").glob("*.1"):
        assert f"{data}man/man1/{page.name}" in names
    assert {f"{data}bash-completion/completions/sxctl", f"{data}zsh/site-functions/_sxctl",
            f"{data}fish/vendor_completions.d/sxctl.fish"} <= names


def test_one_exit_code_table_everywhere():
    from sxctl.errors import EXIT_BY_CODE, EXIT_MEANINGS

    assert set(EXIT_BY_CODE.values()) <= set(EXIT_MEANINGS)
    reference = (REPO / "docs" / "reference" / "json-and-exit-codes.md").read_text()
    exit_table = reference.split("## Error codes")[0]  # the generated code table follows it
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", exit_table, re.M)
    assert {int(code): text for code, text in rows} == EXIT_MEANINGS
    page = (REPO / "man" / "sxctl.1").read_text()
    assert all(f"\\fB{code}\\fR" in page.split(".SH EXIT STATUS")[1] for code in EXIT_MEANINGS)


def test_every_environment_variable_in_the_code_is_in_the_man_pages():
    from sxctl.cli.environment import ENVIRONMENT

    used = set()
    for path in (REPO / "sxctl").rglob("*.py"):
        used |= set(re.findall(r"\b(SXCTL_[A-Z_]+|SX_SESSION_DIR|SCORPIOX_INBOX|COMIS_HOME|NO_COLOR)\b",
                               path.read_text()))
    assert used <= set(ENVIRONMENT), used - set(ENVIRONMENT)
    page = (REPO / "man" / "sxctl-cron.1").read_text().split(".SH ENVIRONMENT")[1]
    assert all(name in page for name in ENVIRONMENT)


def test_man_page_names_are_whole_sentences():
    for page in (REPO / "man").glob("*.1"):
        name_line = page.read_text().split(".SH NAME\n")[1].splitlines()[0]
        assert not name_line.endswith("..."), (page.name, name_line)


def test_the_reference_shows_the_real_help(project):
    reference = (REPO / "docs" / "cli.md").read_text()
    for args in (["--help"], ["inbox", "send", "--help"], ["cron", "add", "--help"]):
        shown = project.run(*args).out
        assert "-h, --help" in shown
        section = reference.split(f"## sxctl {' '.join(args[:-1])}".rstrip() + "\n", 1)[1].split("```")[1]
        assert "-h, --help" in section


def test_the_threat_model_names_rules_and_tests_that_exist():
    """docs/threat-model.md maps every class to its rule and its test: each `module.name` it
    cites is in the code, each `tests/...::test` is a test of that file (a rename breaks this)."""
    import ast
    import importlib

    text = (REPO / "docs" / "threat-model.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| **")]
    assert len(rows) >= 12
    cited_tests = 0
    for row in rows:
        rule, where, tests = row.split(" | ")[1:4]
        for name in re.findall(r"`([a-z_]+(?:\.[A-Za-z_]+)+)`", where + rule):
            parts = name.split(".")
            depth = max(n for n in range(1, len(parts) + 1)  # the longest prefix that is a module
                        if _is_module("sxctl." + ".".join(parts[:n])))
            owner = importlib.import_module("sxctl." + ".".join(parts[:depth]))
            for attribute in parts[depth:]:  # then names inside it: `engines.Crontab._decode`
                assert hasattr(owner, attribute), name
                owner = getattr(owner, attribute)
        file = None
        for path, test in re.findall(r"`((?:tests/(?:\w+/)*)?test_\w+\.py)?::(test_\w+)", tests):
            if path:  # `tests/stress/test_hostile.py::…`, or short: `test_hostile.py::…`
                file = next(found for found in (REPO / path, *(REPO / "tests").rglob(path)) if found.is_file())
            assert file is not None, (row, test)
            defined = {node.name for node in ast.walk(ast.parse(file.read_text()))
                       if isinstance(node, ast.FunctionDef)}
            assert test in defined, (file, test)
            cited_tests += 1
    assert cited_tests >= 40


def _is_module(name: str) -> bool:
    import importlib

    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        return False
    return True


# --- section pointers: every one names a file of docs/protocol/ and a numbered heading there ------------

SECTION = "\u00a7"  # the section sign, spelled so that this file holds no pointer of its own
_NUMBER = r"\d+(?:\.\d+)*"
_RANGE = rf"{SECTION}{_NUMBER}(?:\s*[–-]\s*{SECTION}?{_NUMBER})?"
#: `cron-store.md §6`, `docs/protocol/sessions.md §2-§3`, `` `runner.md` §5 ``, `inbox.md §4-6, §9`
_NAMED = re.compile(rf"(?:docs/protocol/)?(?P<file>[\w-]+\.md)`?\s+(?P<refs>{_RANGE}(?:(?:,\s*|\s+and\s+){_RANGE})*)")


def _pointer_sources() -> list[Path]:
    files = [REPO / "README.md", REPO / "CONTRIBUTING.md"]
    for folder in ("sxctl", "tests", "tools", "docs"):
        files += sorted(p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md") and p.is_file())
    return files


def _headings(name: str) -> set[str] | None:
    """The section numbers of docs/protocol/<name> (`## 6. Authoring`, `### 2.2 Inbox`), or None."""
    page = REPO / "docs" / "protocol" / name
    if not page.is_file():
        return None
    return set(re.findall(rf"^#{{2,4}} ({_NUMBER})\.? ", page.read_text(), re.M))


def _pointer_problems() -> list[str]:
    """`file:line: problem` for every section pointer that names no file or no heading there."""
    problems = []
    for path in _pointer_sources():
        text = path.read_text()
        if SECTION not in text:
            continue
        where = str(path.relative_to(REPO))
        named = set()
        for match in _NAMED.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            named |= {i for i, ch in enumerate(text[match.start():match.end()], match.start()) if ch == SECTION}
            headings = _headings(match["file"])
            if headings is None:
                problems.append(f"{where}:{line}: no docs/protocol/{match['file']}")
                continue
            for first, last in re.findall(rf"{SECTION}({_NUMBER})(?:\s*[–-]\s*{SECTION}?({_NUMBER}))?", match["refs"]):
                wanted = [first, last] if last else [first]
                if last and first.isdigit() and last.isdigit():
                    wanted = [str(n) for n in range(int(first), int(last) + 1)]
                problems += [f"{where}:{line}: {match['file']} has no heading {SECTION}{n}"
                             for n in wanted if n not in headings]
        for index in (i for i, ch in enumerate(text) if ch == SECTION and i not in named):
            line = text.count("\n", 0, index) + 1
            problems.append(f"{where}:{line}: {text[index:index + 12]!r} names no file")
    return problems


def test_every_section_pointer_outside_the_package_resolves():
    """A section pointer says where the rule is written: a file of docs/protocol/ and a heading there, so a
    clone has everything the code and the tests cite."""
    problems = [p for p in _pointer_problems() if not p.startswith("sxctl/")]
    assert problems == [], "\n".join(problems)
    assert _headings("cron-store.md") >= {str(n) for n in range(1, 11)}


def test_every_section_pointer_in_the_package_resolves():
    problems = [p for p in _pointer_problems() if p.startswith("sxctl/")]
    assert problems == [], "\n".join(problems)


def test_every_test_path_the_docs_name_exists():
    """A test file or folder named in the README, CONTRIBUTING, docs/, .ci/run, tools/ or a test
    (`tests/core/inbox/test_forward.py`, `tests/stress/`) is there: moving a test moves its mentions."""
    sources = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / ".ci" / "run",
               *(REPO / "docs").rglob("*.md"), *(REPO / "tools").rglob("*.py"), *(REPO / "tests").rglob("*.py")]
    missing = sorted({f"{source.relative_to(REPO)}: {name}"
                      for source in sources
                      for name in re.findall(r"(?<![\w/.])tests/(?:\w+/)*(?:\w+\.py)?", source.read_text())
                      if not (REPO / name).exists()})
    assert missing == []
