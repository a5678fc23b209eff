"""The agent container's own code: its entry (entry) and the relay to the gateway (relay).

Standard library and flowerbox.wire only: it runs where the agent runs, so it must neither
need nor trust anything the host side has.
"""
