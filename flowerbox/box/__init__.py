"""A box on the host: what it is (spec, pure), what it mounts and refuses (prepare), the
engine driver (engine, terminal, facts), the host-only state (state), the box's git directory
(gitshadow), and how the host reads what the box can write (untrusted).
"""
