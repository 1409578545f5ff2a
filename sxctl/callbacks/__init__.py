"""The session timer table `callbacks.json` (spec callbacks.md), one module per idea; import names
from the module that defines them: `table` (reading rules, both copies of a worktree session,
the tool's validation strings, slots), `protocol` (the revision protocol every write goes
through), `verbs` (set, edit, cancel, pause, the fire preview and the tool's strings) and `move`
(timers out of sessions no agent runs in).
"""
