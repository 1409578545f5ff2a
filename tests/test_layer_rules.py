"""The package's layers, read from its source (ast, not a regex): the CLI talks only to the API,
the core never to the API or the CLI, no import circles among sxctl's modules, no module over
400 lines. Every import counts: module-top, function-level and TYPE_CHECKING alike."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sxctl"
MAX_LINES = 400

#: what `sxctl/cli/` may import from the package
CLI_MAY_IMPORT = ("sxctl.api", "sxctl.errors", "sxctl.cli")
#: the layers above the core; the package root (`from sxctl import send_message`) and
#: `python -m sxctl` are the doors into them
UPPER = ("sxctl.api", "sxctl.cli")
DOORS = ("sxctl", "sxctl.__main__")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str) -> set[str]:
    """The sxctl modules that module `name` imports: `from .x import y` names `x.y` when `y` is a
    module, else `x` (a name that `x` defines); the packages a dotted path passes through are not
    counted (their `__init__` importing their children is not a circle)."""
    tree = ast.parse(MODULES[name].read_text(), str(MODULES[name]))
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "sxctl")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != "sxctl":
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in MODULES else base)
    found.discard(name)
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def test_the_cli_imports_only_the_api_the_errors_and_itself():
    wrong = {(module, target) for module, targets in GRAPH.items() if _within(module, ("sxctl.cli",))
             for target in targets if not _within(target, CLI_MAY_IMPORT)}
    assert wrong == set()


def test_the_core_never_imports_the_api_or_the_cli():
    wrong = {(module, target) for module, targets in GRAPH.items()
             if not _within(module, UPPER) and module not in DOORS
             for target in targets if _within(target, UPPER)}
    assert wrong == set()


def _circles() -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH.get(node, ()):
            if target not in GRAPH:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.add(frozenset(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles():
    circles = _circles()
    assert [sorted(circle) for circle in circles] == []


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_rules_see_function_level_and_relative_imports():
    """The reader itself: a function-level import and `from .. import name` are counted."""
    assert "sxctl.api.scope" in GRAPH["sxctl.cli.output"]
    assert "sxctl.faults" in GRAPH["sxctl.api.scope"]  # `from .. import faults`
    assert "sxctl.cli.complete" in GRAPH["sxctl.cli.output"]  # imported inside `completing`


def test_no_literal_exit_status_outside_the_error_module():
    """`sys.exit`, `os._exit` and click's `Exit` take an `ExitStatus`, never a bare number (the test
    fault hook, sxctl/faults.py, keeps its own 99)."""
    literal = []
    for name, path in MODULES.items():
        if name in ("sxctl.errors", "sxctl.faults"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, int):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("exit", "_exit", "Exit"):
                    literal.append((name, node.lineno))
    assert literal == []


def test_every_error_code_knows_its_exit_status():
    from sxctl.errors import EXIT_BY_CODE, EXIT_MEANINGS, ErrorCode, ExitStatus, SxctlError

    assert {code.value: int(code.status) for code in ErrorCode} == EXIT_BY_CODE
    assert set(EXIT_MEANINGS) <= set(ExitStatus) and ExitStatus.BROKEN_PIPE == 141
    assert SxctlError("x", code=ErrorCode.TOO_LATE).exit_code == ExitStatus.TOO_LATE == 7


#: the modules that decide a job's future: they read a job only through the typed `Job`
#: (sxctl/cron/policy/job.py), never a key of comis's record or of sxctl's policy entry
TIMELINE_DECIDERS = ("sxctl.cron.timeline.fate", "sxctl.cron.timeline.hold", "sxctl.cron.timeline.previews")
#: the keys of comis's stored job and of sxctl's policy entry (cron-store.md, cron/policy/file.py)
JOB_KEYS = {
    "id", "name", "source", "schedule", "lifecycle", "nextRunAtMs", "payload", "deliveryTarget",
    "holdMaxMs", "catchUp", "staleAfterMs", "missedNote", "maxUnconsumed", "maxRunsPerDay", "untilMs", "maxRuns",
    "activeHours", "activeDays", "tz", "overlap", "maintenance", "jitterMs", "host", "pingUrl", "runs",
    "countedId", "limitsFromMs", "day", "paused", "skips", "rateLimitCeiling", "maxSessionTokens",
    "maxTokensPerDay", "onMissingUsage",
}


def test_the_timeline_reads_a_job_only_through_the_typed_job():
    """One model of a job: the rule of each fate reads `Job` fields; a key of either file opened
    by string in a decider is a second reading of that file (the due-time rule was mended in 3-4
    modules at once, twice)."""
    found = []
    for name in TIMELINE_DECIDERS:
        for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("get", "setdefault", "pop") and node.args
                  and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if key in JOB_KEYS:
                found.append(f"{name}:{node.lineno}: {key!r}")
    assert found == []
