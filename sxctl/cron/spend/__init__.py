"""The spend guards: their settings in the policy file (`rules`), the tokens attributed to each
run in `sxctl-spend.json` (`ledger`) and the verdict a pass acts on (`guards`). This package
imports nothing: import from the module."""
