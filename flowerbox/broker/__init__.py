"""The credential broker: the gateway grown into one long-lived service for many runs.

`flowerbox broker` serves every local box of this host user over its own unix sockets, with
one real key, a token per run, and a team budget kept in a SQLite ledger (docs/gateway.md,
"The broker"). `flowerbox "ask"` registers with a running broker (flowerbox.broker.client)
and starts a private gateway as before when none runs.
"""
