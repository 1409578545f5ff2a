"""The agent's drop-in inbox (spec inbox.md), one module per idea; import names from the module
that defines them (`from sxctl.inbox.sending import send`), so a command loads only what it uses:
`inbox send --no-wait` in a shell loop loads `message`, `folder`, `publishing`, `request` and
`sending` and nothing else.

The modules (no two import each other, even indirectly): `message` (bytes, stems, keys),
`folder` (an inbox folder, message states, listings), `publishing` (under a held stem), `request`
(what a send is asked to do), `sending`, `keyed` (the key step of a keyed send), `keys` (key records),
`wait`, `manage` (retract, clean, prune), `move` (one message into another session, and recovery),
`moves` (the records a move leaves), `places` (a key's message across the project) and `forward`
(the `inbox forward` command).
"""
