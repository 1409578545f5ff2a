"""What keeps `sxctl inbox send` (run from loops and crontabs) within 1.25 times `import click`:
before it writes the message it loads sxctl's own modules and, beyond what click itself loads, only
the few standard modules named here (issue #27; docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

#: beyond `import click`: pathlib (and what it loads), and what click loads itself when it parses:
#: locale (gettext, for its help option), difflib and heapq (it tries `-q` as a long option first)
ALLOWED = {"pathlib", "ntpath", "fnmatch", "urllib", "urllib.parse", "ipaddress", "locale", "_locale",
           "difflib", "heapq", "_heapq"}
#: loaded by click anyway, never by sxctl on this path; shutil (with bz2, lzma, zlib) by neither
CLICKS_OWN = ("inspect", "typing", "uuid", "datetime")

PROBE = """
import json, os, sys, traceback
blamed = {}
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED and name not in blamed:
            files = [f.filename for f in traceback.extract_stack() if "importlib" not in f.filename]
            blamed[name] = next((f for f in reversed(files) if "/click/" in f or "/sxctl/" in f), "?")
        return None
WATCHED = %r
sys.meta_path.insert(0, Watch())
real, first = os.replace, []
def replace(src, dst, *args, **kwargs):
    if not first:
        first.append((sorted(m for m in sys.modules if m.split(".")[0] != "sxctl"), dict(blamed)))
    return real(src, dst, *args, **kwargs)
os.replace = replace
from sxctl.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit_:
    print(json.dumps([exit_.code, *first[0]]))
"""


def test_inbox_send_loads_nothing_click_does_not_before_the_write(project):
    project.session(live=False)
    watched = (*CLICKS_OWN, "shutil", "importlib.util")
    probe = subprocess.run([sys.executable, "-c", PROBE % (watched,), "inbox", "send", "hello", "--no-wait", "-q"],
                           cwd=project.root, env=project.env(), capture_output=True, text=True)
    code, loaded, blamed = json.loads(probe.stdout.strip().splitlines()[-1])
    assert code == 0, probe.stderr
    click_only = subprocess.run([sys.executable, "-c", "import json, sys, traceback\nimport click\n"
                                 "print(json.dumps(sorted(sys.modules)))"], env=project.env(),
                                capture_output=True, text=True, check=True)
    extra = set(loaded) - set(json.loads(click_only.stdout))
    assert extra <= ALLOWED, sorted(extra - ALLOWED)
    assert not {"shutil", "bz2", "lzma", "importlib.util"} & set(loaded)
    assert {name: where for name, where in blamed.items() if "/click/" not in where} == {}
    assert set(CLICKS_OWN) <= set(blamed)  # the probe saw them come in (through click)
