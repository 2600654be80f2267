"""Celery: broker, delivery and recovery of ingest and pricing tasks, queues, and the one periodic schedule."""

from celery.schedules import crontab

from governance.lib.env import env_bool, env_float, env_int, env_list, env_str

# --- Celery -------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
# Without a broker, tasks run in-process right after the transaction that enqueued them commits.
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
# Periodic analysis tasks are acknowledged when they start: beat runs them again if a worker dies, and their
# length is then bounded by no visibility timeout. The tasks that must not be lost are set apart below.
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int("CELERY_WORKER_PREFETCH_MULTIPLIER", 1)
CELERY_TASK_DEFAULT_QUEUE = "analysis"
CELERY_TASK_ROUTES = {"usage.*": {"queue": "ingest"}}
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Celery's Django fixup closes every database connection before and after every task unless this is set,
# so each ingest batch paid for a new PostgreSQL backend (fork, authentication, cold catalog caches: more
# CPU than writing the batch's samples). Set, it closes them only every this many tasks; between tasks
# governance/celery.py applies Django's own rule instead (CONN_MAX_AGE, health checks, after errors).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000)

# --- Delivery and recovery (issue 21) -----------------------------------------------------------
# Ingest and pricing tasks (TASK_DELIVERY_PATTERNS) are acknowledged only once they are done and given back to
# the queue at once when their worker process dies (acks_late, reject_on_worker_lost), run under a time limit,
# and retry a transient database error with exponential backoff and full jitter for long enough to outlast a
# database restart (TASK_MAX_RETRIES tries, waits capped at TASK_RETRY_BACKOFF_MAX_S). Housekeeping in those
# namespaces is re-run by beat instead and keeps no time limit. See governance/celery.py.
TASK_DELIVERY_PATTERNS = env_list("TASK_DELIVERY_PATTERNS", ["usage.*", "costs.*"])
TASK_DELIVERY_EXEMPT = ["usage.maintain_partitions", "usage.remap_jobs", "usage.purge_inbox", "usage.check_collectors"]
TASK_TIME_LIMIT_S = env_int("TASK_TIME_LIMIT_S", 120)
TASK_MAX_RETRIES = env_int("TASK_MAX_RETRIES", 12)
TASK_RETRY_BACKOFF_MAX_S = env_int("TASK_RETRY_BACKOFF_MAX_S", 120)
# Redis hands an unacknowledged message to another worker once it is this old. It must exceed the time a message
# legitimately stays unacknowledged: a task's time limit, plus the countdown of a retry, which a Redis worker holds
# unacknowledged until it is due. A dead worker's batches do not wait for it: a worker that connects to the broker
# has the inbox swept at once, and beat sweeps it every INBOX_SWEEP_SECONDS.
BROKER_VISIBILITY_TIMEOUT_S = env_int("BROKER_VISIBILITY_TIMEOUT_S", TASK_TIME_LIMIT_S + TASK_RETRY_BACKOFF_MAX_S + 60)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": BROKER_VISIBILITY_TIMEOUT_S,
    # Look for messages past the visibility timeout every 10 s (kombu's default scans every 100 s).
    "unacked_restore_throttle": 1,
    # A broker that is down or unreachable costs an ingest request seconds at most, never minutes.
    "socket_connect_timeout": env_float("BROKER_CONNECT_TIMEOUT_S", 2.0),
    "socket_timeout": env_float("BROKER_SOCKET_TIMEOUT_S", 10.0),
}
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("BROKER_CONNECT_TIMEOUT_S", 2.0)
# A worker that lost the broker tries again at once, then every second, then every BROKER_RECONNECT_MAX_S at most
# (kombu's own waits grow by 2 s a try up to 30 s, so a minute's outage cost up to 30 s more), and never gives up:
# a worker that exits for want of a broker helps nobody. See governance.celery.Consumer.
BROKER_RECONNECT_MAX_S = env_float("BROKER_RECONNECT_MAX_S", 2.0)
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CONSUMER = "governance.celery:Consumer"
CELERY_TASK_ANNOTATIONS = ["governance.celery.DeliveryPolicy"]
# After an enqueue fails (broker down), the web process stores batches without trying the broker for this long;
# the sweep enqueues them.
INGEST_ENQUEUE_PAUSE_S = env_float("INGEST_ENQUEUE_PAUSE_S", 5.0)
# An ingest worker process asks for a pricing pass at most this often (seconds; a pass prices every mark left, so
# one after a second's batches does what one per batch did); 0: one per batch.
INGEST_REPRICE_EVERY_S = env_float("INGEST_REPRICE_EVERY_S", 1.0)
# Pricing marks a pass claims (then the rest of the last cluster-day it reached). Marks are claimed by whole
# cluster-days, oldest first, and a pass pays once for each job it prices (its facts, its hours, its month's sums):
# a backlog of a large fleet's days (a month loaded in arrears, a worker that was down) is priced in passes of a
# few days each, where a smaller pass would price each long job again for every day or two. Measured here
# (benchmarks/pricing.py, a month of 25,600 one-GPU jobs of ten days): 20,000 a pass priced 5,075 job-days/s with a
# peak of 207 MB, 50,000 7,092/s and 321 MB, 100,000 7,289/s and 480 MB; about 7 s a pass at 50,000, well inside
# TASK_TIME_LIMIT_S. Lower it for workers short of memory.
PRICING_CLAIM_MARKS = env_int("PRICING_CLAIM_MARKS", 50_000)
# A worker that takes a batch of fewer than INGEST_COALESCE_RECORDS records (a node agent's is one record per GPU
# and job) may also take the batches of the same token waiting behind it, up to INGEST_COALESCE_BATCHES in all and
# INGEST_COALESCE_RECORDS records together, and write them in one transaction (PostgreSQL): what a batch costs a
# worker is mostly the same for 8 records as for 2,000 (a transaction, the lookups, the folds). Off (1: each batch
# alone) by default for now: a group written in several runs (governance/usage/groups.py) takes its row locks run by
# run, not in one order, so two workers' groups can deadlock (the group is then written batch by batch, nothing lost,
# but each batch of it counts an extra attempt). 32 is what the measurements in docs/scaling.md used.
INGEST_COALESCE_BATCHES = env_int("INGEST_COALESCE_BATCHES", 1)
INGEST_COALESCE_RECORDS = env_int("INGEST_COALESCE_RECORDS", 10_000)
# How long a worker waits for the row lock of a batch another session holds (a session about to die, most often)
# before it retries the batch later.
INGEST_CLAIM_LOCK_TIMEOUT_S = env_float("INGEST_CLAIM_LOCK_TIMEOUT_S", 5.0)
# The PostgreSQL session of each worker process: a worker killed or cut off in the middle of a transaction gives
# its row locks back within seconds (a backend running a statement notices its client is gone; keepalives find a
# vanished host), and a worker stuck inside a transaction loses it.
WORKER_DATABASE_SESSION = {
    "client_connection_check_interval": "1s",
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
    "idle_in_transaction_session_timeout": f"{env_int('WORKER_IDLE_IN_TRANSACTION_TIMEOUT_S', 300)}s",
}

# --- Periodic work (governance/schedule): CELERY_BEAT_SCHEDULE is the one schedule. Production runs celery beat;
# the embedded default (no broker) runs the same entries in a thread of `manage.py runserver`.
GOVERNANCE_INPROCESS_SCHEDULER = env_bool("GOVERNANCE_INPROCESS_SCHEDULER", not CELERY_BROKER_URL)
GOVERNANCE_INPROCESS_SCHEDULER_TICK_S = env_float("GOVERNANCE_INPROCESS_SCHEDULER_TICK_S", 5)

# --- Periodic work (celery beat): every entry of the one schedule, whichever app owns its task. Each entry is
# idempotent: running it twice does no harm.
# The inbox sweep is the last resort of delivery: it re-enqueues batches left unprocessed for INBOX_SWEEP_AFTER_S.
INBOX_SWEEP_SECONDS = env_float("INBOX_SWEEP_SECONDS", 15.0)
INBOX_SWEEP_AFTER_S = env_float("INBOX_SWEEP_AFTER_S", 30.0)
# Processed inbox batches are deleted this many days after processing; 0 keeps them. A batch id is recognised as
# a duplicate only while its inbox row exists: keep this longer than any agent's spool can hold batches back.
INBOX_RETENTION_DAYS = env_int("INBOX_RETENTION_DAYS", 7)
# A collector is silent once no batch of it arrived for INGEST_SILENT_INTERVALS x INGEST_COLLECTOR_INTERVAL_S (the
# agent cuts a batch every --batch-seconds, 60 by default); the ingest health page shows it, and its silence is
# announced once (event `collector.silent`) to the admins' email and GOVERNANCE_NOTIFY_DESTINATIONS.
INGEST_COLLECTOR_INTERVAL_S = env_float("INGEST_COLLECTOR_INTERVAL_S", 60.0)
INGEST_SILENT_INTERVALS = env_int("INGEST_SILENT_INTERVALS", 5)
CELERY_BEAT_SCHEDULE = {
    # usage
    "sweep-ingest-inbox": {"task": "usage.sweep_inbox", "schedule": INBOX_SWEEP_SECONDS},
    "purge-ingest-inbox": {"task": "usage.purge_inbox", "schedule": 24 * 3600.0},
    "maintain-sample-partitions": {"task": "usage.maintain_partitions", "schedule": 6 * 3600.0},
    "check-collectors": {"task": "usage.check_collectors", "schedule": 60.0},
    # costs: the charge ledger's marked days are re-priced after each batch and every minute; running jobs every
    # 5 minutes
    "reprice-marked-days": {"task": "costs.reprice", "schedule": 60.0},
    "reprice-running-jobs": {"task": "costs.reprice_running", "schedule": 300.0},
    "check-budgets": {"task": "costs.check_budgets", "schedule": 900.0},
    "detect-anomalies": {"task": "costs.detect_anomalies", "schedule": 3600.0},
    # efficiency
    "evaluate-running-jobs": {"task": "efficiency.evaluate_running", "schedule": 15 * 60.0},
    "evaluate-ended-jobs": {"task": "efficiency.evaluate_ended", "schedule": 5 * 60.0},
    "check-cluster-utilisation": {"task": "efficiency.cluster_alerts", "schedule": 60 * 60.0},
    "refresh-finding-savings": {"task": "efficiency.refresh_savings", "schedule": 24 * 3600.0},
    "weekly-findings-digest": {
        "task": "efficiency.weekly_digest",
        "schedule": crontab(minute=0, hour=7, day_of_week="mon"),
    },
    # remediation: warn, warn again, act (or record what would be done) under each policy that is not off
    "check-remediation": {"task": "remediation.check", "schedule": env_float("REMEDIATION_CHECK_SECONDS", 300.0)},
    # notify
    "deliver-notifications": {"task": "notify.deliver_due", "schedule": 60.0},
    # api: the rate and invalid-token counters of windows over
    "purge-rate-counts": {"task": "api.purge_rate_counts", "schedule": 3600.0},
    # api: the users' read-your-writes marks past their time (governance/lib/replica.py)
    "purge-write-marks": {"task": "api.purge_write_marks", "schedule": 3600.0},
}
# Housekeeping is not ingest: keep it off the ingest workers.
CELERY_TASK_ROUTES |= {task: {"queue": "analysis"} for task in TASK_DELIVERY_EXEMPT}
