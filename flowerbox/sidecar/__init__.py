"""The gateway container's code: the only process of a box that holds the real API key.

The credential-injecting gateway (gateway), the egress proxy (proxy, egress), the strict HTTP
reading both share (http), and the budget it meters (meter, pricing). It imports nothing from
the host side (box, runs, selftest, cli): the gateway container runs it with no engine, no
host state, and no way to reach them.
"""
