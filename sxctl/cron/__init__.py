"""The scheduler (spec cron-store.md, runner.md): comis's job store and ledger, sxctl's policy
file, and the pass that runs due jobs. Import names from the module that defines them; this
package imports nothing, so a command loads only the parts it uses."""
