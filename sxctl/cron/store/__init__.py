"""comis's files as comis defines them (spec cron-store.md): the strict v1 format (`schema`, on
the `schema_kit`), locked reads and writes of `cron-jobs.json` (`file`), the one transaction that
changes the store and sxctl's policy file together (`transaction`), comis's add/update/pause/
resume/remove rules (`authoring`), where a job's messages go (`targets`) and where a workspace
keeps its files (`workspace`). This package imports nothing: import from the module."""
