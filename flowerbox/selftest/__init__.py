"""`flowerbox selftest` and `flowerbox doctor`: the escape probes run in a real box (probes,
tampering, sockets, syscalls: they run inside it), the box broken on purpose (controls), the
host's own code run against what the box planted (hostboundary), and the judges (verdicts,
runner).
"""
