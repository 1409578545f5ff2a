"""Print the shell script of one step of the GitHub Actions example in docs/guides/scripting.md,
with the `${{ … }}` expressions it uses replaced by NAME=VALUE arguments: `.ci/run` runs the
steps as written.

    python tools/ci_step.py "Install sxctl"
    python tools/ci_step.py "Tell the agent about the failure" github.run_id=1 github.ref_name=main
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "scripting.md"


def step_script(guide: str, name: str, values: dict[str, str]) -> str:
    block = re.search(r"```yaml\n(.*?)```", guide, re.S)
    if block is None:
        raise SystemExit(f"{GUIDE} has no ```yaml block")
    lines = block.group(1).splitlines()
    start = lines.index(f"- name: {name}")
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    body = []
    for line in lines[run + 1:]:
        if not line.startswith("    "):
            break
        body.append(line[4:])
    script = "\n".join(body) + "\n"

    def substitute(match: re.Match) -> str:
        expression = match.group(1).strip()
        if expression not in values:
            raise SystemExit(f"no value given for ${{{{ {expression} }}}}")
        return values[expression]

    return re.sub(r"\$\{\{(.*?)\}\}", substitute, script)


if __name__ == "__main__":
    pairs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    sys.stdout.write(step_script(GUIDE.read_text(), sys.argv[1], pairs))
