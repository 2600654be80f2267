"""Remediation of idle GPUs (governance/remediation): how often the check runs, when data is stale, what counts as
reclaimed, and the Kubernetes service account the actions use. The policies themselves are rows (opt-in, off by
default)."""

from governance.lib.env import env_float, env_str

REMEDIATION_CHECK_SECONDS = env_float("REMEDIATION_CHECK_SECONDS", 300.0)
# A job whose GPUs have reported nothing for this long is never warned further nor acted on: its collector is silent.
REMEDIATION_STALE_AFTER_MINUTES = env_float("REMEDIATION_STALE_AFTER_MINUTES", 15.0)
# Reclaimed GPU-hours of a job with no known time limit: the GPUs for this many hours after the action.
REMEDIATION_RECLAIM_HORIZON_HOURS = env_float("REMEDIATION_RECLAIM_HORIZON_HOURS", 24.0)
REMEDIATION_K8S_TOKEN_FILE = env_str(
    "REMEDIATION_K8S_TOKEN_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/token"
)
REMEDIATION_K8S_CA_FILE = env_str("REMEDIATION_K8S_CA_FILE", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
