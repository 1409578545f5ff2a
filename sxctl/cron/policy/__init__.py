"""sxctl's own settings beside comis's store: the policy file `.scheduler/sxctl-policy.json`
(`file`, its format-3 keys in `keys`), and the rules each setting is: host pins (`hosts`),
maintenance windows (`maintenance`), deterministic jitter (`jitter`), the overlap policy
(`overlap`). This package imports nothing: import from the module."""
