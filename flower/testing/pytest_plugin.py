"""pytest fixtures for the scripted fake Messages API (loaded through the pytest11 entry point)."""
