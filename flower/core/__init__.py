"""The execution core: runtime, agents, guards, events, documents."""
