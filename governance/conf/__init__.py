"""Settings by concern, read from the environment and imported by governance/settings.py."""
