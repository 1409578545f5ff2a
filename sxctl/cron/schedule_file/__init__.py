"""Jobs as code: a schedule file (`sxctl.toml`) kept in git, read (read.py) into each job's declared
form (declared.py), planned and applied in one store transaction (plan.py), its drift from the last
apply found (drift.py; both read the apply's record, applied.py), and written from today's jobs
(write.py) — `cron plan`, `cron apply`, `cron dump`."""
