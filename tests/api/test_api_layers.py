"""The API applies the rules the CLI is documented to apply (docs/api.md: the same checks)."""

from __future__ import annotations

import json
import os

import pytest


@pytest.fixture
def in_project(project):
    folder = project.session(live=False)
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("SXCTL_", "SX_"))}
    cwd = os.getcwd()
    os.chdir(project.root)
    try:
        yield folder
    finally:
        os.chdir(cwd)
        os.environ.update(saved)


def _written(folder, stem):
    return json.loads((folder / "inbox" / f"{stem}.json").read_text())


def test_send_message_queues_a_tilde_text_without_a_mode(in_project):
    from sxctl import send_message

    result = send_message("~  also check the docs", soft_wait=False)
    assert _written(in_project, result.stem) == {"text": "also check the docs", "mode": "queue"}


def test_send_message_with_a_mode_sends_a_tilde_text_as_it_is(in_project):
    from sxctl import send_message

    result = send_message("~home", mode="auto", soft_wait=False)
    assert _written(in_project, result.stem)["text"] == "~home"
    assert _written(in_project, send_message("plain", soft_wait=False).stem)["mode"] == "auto"


def test_every_error_class_and_the_status_enums_are_importable_from_the_package():
    """A caller catches what the API raises by importing it from `sxctl`, never `sxctl.errors`."""
    import inspect

    import sxctl
    from sxctl import errors

    public = {name for name, value in vars(errors).items()
              if inspect.isclass(value) and value.__module__ == errors.__name__ and not name.startswith("_")}
    assert public <= set(sxctl.__all__)
    assert all(getattr(sxctl, name) is getattr(errors, name) for name in public)
