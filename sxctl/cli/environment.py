"""The environment variables sxctl reads or sets, for the man pages' ENVIRONMENT section (a test
checks that every `SXCTL_*` name in the code is listed here)."""

from __future__ import annotations

#: name -> what it does
ENVIRONMENT: dict[str, str] = {
    "SXCTL_PROJECT": "The project root, as --project.",
    "SXCTL_SESSION": "The session id, as --session.",
    "SXCTL_WORKSPACE": "The comis workspace (the folder holding .scheduler/), as --workspace.",
    "SXCTL_AGENT": "The comis agentId for new jobs and claims, as --agent.",
    "SXCTL_DELIVER_CMD": "How `cron tick` delivers a delivery job: a /bin/sh command that gets the text on stdin.",
    "SXCTL_MAX_LOG_BYTES": "The ledger's byte ceiling (comis's default unless set).",
    "SXCTL_HOST": "The host a scheduler pass runs as (--host pins, its heartbeat file); default: the host name.",
    "SXCTL_JOB_ID": "Set for SXCTL_DELIVER_CMD and wake gates: the job being run.",
    "SXCTL_JOB_NAME": "Set for SXCTL_DELIVER_CMD and wake gates: its name.",
    "SXCTL_EXECUTION_ID": "Set for SXCTL_DELIVER_CMD and wake gates: the run's execution id.",
    "SXCTL_SCHEDULED_FOR_MS": "Set for SXCTL_DELIVER_CMD: the occurrence being run.",
    "SXCTL_TRIGGER": "Set for SXCTL_DELIVER_CMD: scheduled, catchup or manual.",
    "SXCTL_TARGET_PROJECT": "Set for SXCTL_DELIVER_CMD: the job's target project.",
    "SXCTL_TARGET_CONVERSATION": "Set for SXCTL_DELIVER_CMD: the job's target conversation.",
    "SXCTL_TARGET_SESSION": "Set for SXCTL_DELIVER_CMD: the session the target resolved to.",
    "SXCTL_TURN_SOURCE": "Set for `agent run --exec`: inbox, callback, queue or interrupt.",
    "SXCTL_TURN_MODE": "Set for `agent run --exec`: the message's mode.",
    "SXCTL_TURN_STEM": "Set for `agent run --exec`: the message's stem.",
    "SXCTL_TURN_SLOT": "Set for `agent run --exec`: the timer slot that fired.",
    "SXCTL_TURN_IMAGE": "Set for `agent run --exec`: the image sidecar's path.",
    "SXCTL_INTERRUPTS": "Set for `agent run --exec`: a file that receives interrupts delivered mid-turn.",
    "SX_SESSION_DIR": "A session folder of <project>/.scorpiox/sessions/ (the agent sets it for its tools).",
    "SCORPIOX_INBOX": "0 means the agent does not poll its inbox: sxctl warns and still writes.",
    "COMIS_HOME": "Where comis keeps its daemon lock (besides ~/.comis).",
    "NO_COLOR": "No colour in human output.",
}
