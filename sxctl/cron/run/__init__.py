"""Running due jobs (spec runner.md): one pass (`tick`: reconcile, select, claim, dispatch,
settle), dispatching one occurrence (`dispatch`), comis's execution ledger (`ledger`, its rows in
`ledger_rows`), the store and the ledger checked as a pass reads them (`file_checks`), did the
agent read it (`receipts`), why a run failed (`failures`), what a pass reports (`pass_report`),
push monitoring (`pings`), the pass's heartbeat (`heartbeat`) and `cron simulate`, the real pass
over a copy (`rehearsal`). This package imports nothing."""
