"""The security replays use the API tests' world (jobs of two teams, findings, tokens) and fresh throttles."""

from tests.api.conftest import _fast_passwords_and_fresh_throttles, world  # noqa: F401
