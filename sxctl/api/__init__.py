"""The use-case layer: one function per CLI command, for your own tooling and for the CLI itself.

    from sxctl import send_message, wait_for_message, set_timer, add_job, job_runs

Every command of `sxctl` parses its arguments, calls exactly one function here and renders the
typed result it returns (each has `to_json()`, the command's `--json` document). Functions find
the project, session and workspace the way the CLI does (explicit arguments, then the SXCTL_* /
SX_SESSION_DIR environment, then discovery from the working folder), take times in seconds, and
raise an `SxctlError` subclass carrying the CLI's exit code on failure. Each part loads on first
use, so `import sxctl` stays cheap: importing every part costs about 2.5 times the inbox part
alone (measured with `-X importtime`), and `sxctl inbox send` runs in shell loops.
"""

from __future__ import annotations

from ..lazy import lazy_parts
from ..version import __version__  # noqa: F401 - the CLI's `--version`

#: the part that defines each function (and result type) this package offers
_PARTS: dict[str, tuple[str, ...]] = {
    "scope": ("find_project", "find_session", "find_workspace"),
    "inbox": ("send_message", "list_messages", "show_message", "wait_for_message", "retract_message",
              "clean_inbox", "prune_inbox", "forward_messages", "MessageList", "MessageView", "Retraction", "Removal",
              "Forwarding"),
    "message_lifetimes": ("expire_messages", "Expiry"),
    "usage_gate": ("GatedSend",),
    "callbacks": ("list_timers", "set_timer", "edit_timer", "cancel_timers", "pause_timers", "publish_timers",
                  "preview_timers", "move_timers", "TimerTable", "TimerMove"),
    "sessions": ("list_sessions", "show_session", "which_session", "get_config", "SessionList", "SessionDetail",
                 "SessionChoice"),
    "jobs": ("init_workspace", "add_job", "update_job", "pause_job", "remove_job", "job_spec", "WorkspaceInit",
             "JobChange"),
    "job_views": ("list_jobs", "show_job", "next_fires", "JobList", "JobDetail", "FireList"),
    "cron_checks": ("cron_status", "job_runs", "validate_workspace", "wake_agent", "CronStatus", "RunList",
                    "Validation", "Wake"),
    "budget": ("show_budget", "set_budget", "Budget"),
    "scheduler": ("tick", "run_job", "PassOutcome", "ManualRun"),
    "simulate": ("simulate_schedule", "Simulation"),
    "workspace_policy": ("workspace_defaults", "WorkspaceDefaults"),
    "observe": ("project_status", "project_metrics", "upcoming", "watch", "StatusView", "Metrics", "Upcoming",
                "Watch"),
    "agent": ("run_agent", "AgentRun"),
    "engines": ("export_scheduler", "hand_off", "SchedulerExport", "Handoff"),
    "doctor_report": ("doctor", "DoctorReport"),
    "repair": ("repair_scheduler", "Repair"),
    "schedule_file": ("plan_schedule", "apply_schedule", "dump_schedule", "schedule_drift", "SchedulePlan",
                      "ScheduleDump"),
}
__getattr__, __all__ = lazy_parts(__name__, globals(), _PARTS)
