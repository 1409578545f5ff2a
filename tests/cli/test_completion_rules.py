"""Shell completion applies the commands' own rules (through the API): the global options wherever
they are given, the workspace and session found as a command finds them, a slot active as
`callbacks list` says. Driven through click's completion machinery (`_SXCTL_COMPLETE`)."""

from __future__ import annotations

import json
import os

from tests.conftest import EXAMPLES, run_cli


def _complete(line: str, *, cwd, env: dict[str, str]) -> list[str]:
    """What bash would offer for `line` (the word after its last space is being completed)."""
    words = line.split(" ")
    environment = {**os.environ, **env, "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1),
                   "_SXCTL_COMPLETE": "bash_complete"}
    result = run_cli([], env=environment, cwd=cwd)
    return [item.split(",", 1)[1] for item in result.out.splitlines() if "," in item]


def _store(project) -> None:
    scheduler = project.root / ".scheduler"
    scheduler.mkdir()
    (scheduler / "cron-jobs.json").write_bytes((EXAMPLES / "cron-jobs.json").read_bytes())


def test_the_project_option_before_the_group_is_honoured_from_another_folder(project, tmp_path):
    _store(project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    line = f"sxctl --project {project.root} cron pause "
    names = _complete(line, cwd=elsewhere, env=project.env())
    assert names and "morning-briefing" in names
    assert _complete(f"sxctl cron pause --project {project.root} mor", cwd=elsewhere,
                     env=project.env()) == ["morning-briefing"]


def test_a_legacy_slot_without_active_but_with_fires_left_is_completed_as_callbacks_list_shows_it(project):
    folder = project.session()
    table = json.loads((EXAMPLES / "callbacks.json").read_bytes())
    table["slots"].append({"id": 5, "message": "legacy", "delay_ms": 60000, "repeat_count": 2,
                           "fire_at_ms": 1789974150000})  # written before `active` existed
    (folder / "callbacks.json").write_text(json.dumps(table))
    listed = project.run("callbacks", "list", "--json").json()
    assert 5 in [slot["id"] for slot in listed["slots"]]
    assert _complete("sxctl cb cancel ", cwd=project.root, env=project.env()) == ["0", "3", "5"]


def test_slot_options_complete_the_active_slots(project):
    project.session("s1", live=False)
    for message in ("a", "b"):
        assert project.run("--session", "s1", "-q", "cb", "set", message, "--every", "1m").code == 0
    env = project.env()
    assert _complete("sxctl --session s1 cb next --slot ", cwd=project.root, env=env) == ["0", "1"]
    assert _complete("sxctl --session s1 cb set x --every 5 --replace --slot ", cwd=project.root, env=env) == ["0", "1"]


def test_a_malformed_completion_request_completes_nothing_silently(project):
    base = {**project.env(), "_SXCTL_COMPLETE": "bash_complete"}
    for extra, drop in (({"COMP_WORDS": "sxctl cb", "COMP_CWORD": "x"}, ()),
                        ({"COMP_WORDS": "sxctl cb"}, ("COMP_CWORD",)),
                        ({}, ("COMP_WORDS", "COMP_CWORD")),
                        ({"_SXCTL_COMPLETE": "fish_complete", "COMP_WORDS": "sxctl ", "COMP_CWORD": " "}, ()),
                        ({"_SXCTL_COMPLETE": "zsh_complete"}, ("COMP_WORDS", "COMP_CWORD"))):
        env = {k: v for k, v in {**base, **extra}.items() if k not in drop}
        result = run_cli([], env=env, cwd=project.root)
        assert (result.code, result.out, result.err) == (0, "", ""), extra
