"""A real Slurm cluster for tests: Debian's slurmctld, slurmd, slurmdbd and slurmrestd (22.05), configured in a temp
directory on free ports, with GPUs as generic resources (4 per node; Slurm 22.05 drops a GPU without a device file, so
each is a link to /dev/null) and two slurmd faking two nodes on localhost. Django-free, so other suites (remediation:
scancel, scontrol requeue) can start one too; in pytest, use the session fixtures of tests/slurm/conftest.py.

    dbd = SlurmDbd.start(root)                      # munged (own key and socket) + slurmdbd on MariaDB 127.0.0.1:3306
    cluster = SlurmCluster.start(root / "gres", dbd, name="gg-gres", gres_accounted=True)
    job = cluster.submit("sleep 3", gpus=2, account="nlp")  # sbatch --parsable: the job id
    cluster.wait_state(job, "RUNNING")
    cluster.cli(["scontrol", "requeue", job])      # any Slurm command, with this cluster's SLURM_CONF (cluster.env)
    cluster.rest_url, cluster.rest_headers          # slurmrestd (rest_auth/jwt) and a `scontrol token` JWT for it
    cluster.stop(); dbd.stop()                      # by PID; the database is dropped

Every daemon runs in the foreground (-D) as a child process and is stopped by its PID. slurmdbd and munged are shared
by the clusters of a run (one database, created per run and dropped at the end). SlurmUser is root: start as root.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "slurmdbd", "slurmrestd", "sbatch", "sacctmgr", "mysql")
PACKAGES = "slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-jwt-plugin munge mariadb-server"
PLUGINS = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm")
MARIADB = ("127.0.0.1", 3306)
ACCOUNTS = ("nlp", "vision")
REST_VERSION = "v0.0.38"  # the newest data_parser of Slurm 22.05's openapi plugins


class SlurmUnavailable(Exception):
    """Slurm cannot start here (a program, a plugin or MariaDB missing); the message says which."""


class SlurmTimeout(Exception):
    pass


class SlurmCommandFailed(Exception):
    pass


def missing() -> str | None:
    """Why Slurm cannot start on this machine, or None."""
    if os.geteuid() != 0:
        return "the test cluster runs its daemons as root (SlurmUser=root; slurmrestd drops to nobody)"
    absent = [p for p in PROGRAMS if shutil.which(p) is None]
    if absent:
        return f"{', '.join(absent)} not installed (apt-get install {PACKAGES})"
    if not (PLUGINS / "auth_jwt.so").exists():
        return "auth/jwt plugin not installed (apt-get install slurm-wlm-jwt-plugin)"
    try:
        socket.create_connection(MARIADB, timeout=2).close()
    except OSError:
        return f"no MariaDB on {MARIADB[0]}:{MARIADB[1]}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 30.0, every: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; SlurmTimeout naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if result := check():
                return result
        except (OSError, subprocess.SubprocessError):
            pass
        if time.monotonic() > deadline:
            raise SlurmTimeout(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


@dataclass
class Daemons:
    """Child processes started in the foreground, stopped by PID (SIGTERM, then SIGKILL), newest first."""

    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def spawn(self, name: str, argv: Sequence[str], *, log: Path, env: dict[str, str] | None = None) -> None:
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs.append((name, proc))
        time.sleep(0.05)
        if proc.poll() is not None:
            raise SlurmUnavailable(f"{name} exited {proc.returncode} at start: {log.read_text()[-800:]}")

    def alive(self, name: str) -> None:
        for each, proc in self.procs:
            if each == name and proc.poll() is not None:
                raise SlurmUnavailable(f"{name} exited {proc.returncode}")

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        # slurmd and slurmctld take seconds to shut down cleanly; nothing of theirs outlives the run, so after a grace
        # period each left is killed.
        deadline = time.monotonic() + 1
        for _, proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


@dataclass
class SlurmDbd:
    """munged (own key and socket) and slurmdbd on a database of its own in the local MariaDB, shared by clusters."""

    root: Path
    port: int
    database: str
    socket: Path
    jwt_key: Path
    daemons: Daemons

    @classmethod
    def start(cls, root: Path) -> SlurmDbd:
        if reason := missing():
            raise SlurmUnavailable(reason)
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        dbd = cls(
            root=root,
            port=free_port(),
            database=f"gg_slurm_{uuid.uuid4().hex[:12]}",
            socket=root / "munge.sock",
            jwt_key=root / "jwt.key",
            daemons=Daemons(),
        )
        try:
            dbd._start()
        except BaseException:
            dbd.stop()
            raise
        return dbd

    def _start(self) -> None:
        root = self.root
        key = root / "munge.key"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
        key.chmod(0o600)
        self.jwt_key.write_bytes(secrets.token_bytes(32))
        self.jwt_key.chmod(0o600)
        self.daemons.spawn(
            "munged",
            ["munged", "--foreground", "--force", f"--socket={self.socket}", f"--key-file={key}",
             f"--pid-file={root / 'munged.pid'}", f"--log-file={root / 'munged.log'}",
             f"--seed-file={root / 'munge.seed'}"],
            log=root / "munged.out",
        )  # fmt: skip
        wait_for("munged's socket", self.socket.exists, timeout=10)
        conf = _write(
            root / "slurmdbd.conf",
            f"""AuthType=auth/munge
AuthInfo=socket={self.socket}
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={self.jwt_key}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.port}
SlurmUser=root
PidFile={root / "slurmdbd.pid"}
LogFile={root / "slurmdbd.log"}
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost={MARIADB[0]}
StoragePort={MARIADB[1]}
StorageUser=root
StorageLoc={self.database}
""",
            0o600,
        )
        # slurmdbd reads slurmdbd.conf from the directory of SLURM_CONF (it has no -f).
        env = {**os.environ, "SLURM_CONF": str(conf.with_name("slurm.conf"))}
        self.daemons.spawn("slurmdbd", ["slurmdbd", "-D"], log=root / "slurmdbd.out", env=env)
        wait_for("slurmdbd", lambda: self.daemons.alive("slurmdbd") or _listening(self.port), timeout=30)

    def stop(self) -> None:
        self.daemons.stop()
        drop = f"DROP DATABASE IF EXISTS {self.database}"
        subprocess.run(
            ["mysql", "-h", MARIADB[0], "-P", str(MARIADB[1]), "-u", "root", "-e", drop],
            check=False,
            capture_output=True,
        )


@dataclass
class SlurmCluster:
    """One cluster: slurmctld, two slurmd (nodes gg1 and gg2 on localhost, 4 counted GPUs each) and slurmrestd.

    `conf_dir` holds slurm.conf, gres.conf and the logs; `env` is the environment for the Slurm CLI (SLURM_CONF);
    `rest_url` is slurmrestd (rest_auth/jwt) and `token` a JWT from `scontrol token` for `rest_headers`.
    """

    name: str
    conf_dir: Path
    gres_accounted: bool
    dbd: SlurmDbd
    daemons: Daemons
    ctld_port: int = 0
    rest_port: int = 0
    token: str = ""
    nodes: tuple[str, ...] = ("gg1", "gg2")
    gpus_per_node: int = 4

    @property
    def conf(self) -> Path:
        return self.conf_dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def rest_env(self) -> dict[str, str]:
        """What the agent's SlurmRest reads: the token and the user it was issued to."""
        return {"SLURM_JWT": self.token, "SLURM_USER_NAME": "root"}

    @property
    def rest_headers(self) -> dict[str, str]:
        return {"X-SLURM-USER-TOKEN": self.token, "X-SLURM-USER-NAME": "root"}

    @classmethod
    def start(cls, conf_dir: Path, dbd: SlurmDbd, *, name: str, gres_accounted: bool) -> SlurmCluster:
        conf_dir.mkdir(parents=True, exist_ok=True)
        conf_dir.chmod(0o755)
        cluster = cls(name=name, conf_dir=conf_dir, gres_accounted=gres_accounted, dbd=dbd, daemons=Daemons())
        try:
            cluster._start()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start(self) -> None:
        self.ctld_port, self.rest_port = free_port(), free_port()
        node_ports = {node: free_port() for node in self.nodes}
        self._write_conf(node_ports)
        self.cli(["sacctmgr", "-i", "add", "cluster", self.name])
        for account in ACCOUNTS:
            self.cli(["sacctmgr", "-i", "add", "account", account, f"cluster={self.name}"])
        self.cli(["sacctmgr", "-i", "add", "user", "root", f"account={','.join(ACCOUNTS)}", f"cluster={self.name}"])
        d = self.conf_dir
        self.daemons.spawn("slurmctld", ["slurmctld", "-D", "-i"], log=d / "slurmctld.out", env=self.env)
        wait_for("slurmctld", lambda: self.daemons.alive("slurmctld") or _listening(self.ctld_port))
        for node in self.nodes:
            self.daemons.spawn(
                f"slurmd {node}", ["slurmd", "-D", "-N", node], log=d / f"slurmd-{node}.out", env=self.env
            )
        wait_for("the nodes to be idle", self._nodes_idle)
        self.token = self._token()
        self.daemons.spawn(
            "slurmrestd",
            ["slurmrestd", "-f", str(self.conf), "-a", "rest_auth/jwt",
             "-s", f"openapi/{REST_VERSION},openapi/db{REST_VERSION}",
             "-u", "nobody", "-g", "nogroup", f"127.0.0.1:{self.rest_port}"],
            log=d / "slurmrestd.out",
            env={**self.env, "SLURM_JWT": "daemon"},
        )  # fmt: skip
        wait_for("slurmrestd", lambda: self.daemons.alive("slurmrestd") or _listening(self.rest_port))

    def _write_conf(self, node_ports: dict[str, int]) -> None:
        d, dbd = self.conf_dir, self.dbd
        nodes = "\n".join(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs=8 RealMemory=4000 "
            f"Gres=gpu:{self.gpus_per_node} State=UNKNOWN"
            for n, p in node_ports.items()
        )
        _write(
            d / "slurm.conf",
            f"""ClusterName={self.name}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dbd.socket}
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={dbd.jwt_key}
StateSaveLocation={d / "state"}
SlurmdSpoolDir={d / "spool-%n"}
SlurmctldPidFile={d / "slurmctld.pid"}
SlurmdPidFile={d / "slurmd-%n.pid"}
SlurmctldLogFile={d / "slurmctld.log"}
SlurmdLogFile={d / "slurmd-%n.log"}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=1
InactiveLimit=0
MinJobAge=600
MessageTimeout=10
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd.port}
AccountingStoragePass={dbd.socket}
{"AccountingStorageTRES=gres/gpu" if self.gres_accounted else ""}
JobRequeue=1
{nodes}
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""",
        )
        # Slurm 22.05's slurmd drops a GPU without a device file ("Removing file-less GPU"), so each fake GPU is a
        # link to /dev/null: a character device, as gres/gpu requires, that nothing binds.
        devices = d / "dev"
        devices.mkdir(exist_ok=True)
        for index in range(self.gpus_per_node):
            if not (devices / f"nvidia{index}").exists():
                (devices / f"nvidia{index}").symlink_to("/dev/null")
        last = self.gpus_per_node - 1
        _write(
            d / "gres.conf",
            f"AutoDetect=off\nNodeName={','.join(node_ports)} Name=gpu File={devices}/nvidia[0-{last}]\n",
        )
        for sub in ("state", *(f"spool-{node}" for node in node_ports)):
            (d / sub).mkdir(exist_ok=True)

    def _nodes_idle(self) -> bool:
        out = self.cli(["sinfo", "--noheader", "--Node", "--format=%N %t"]).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return all(states.get(node, "").startswith("idle") for node in self.nodes)

    def _token(self) -> str:
        out = self.cli(["scontrol", "token", "username=root", "lifespan=7200"]).stdout.strip()
        return out.split("=", 1)[1]

    def cli(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster (SLURM_CONF set); SlurmCommandFailed carries its stderr."""
        done = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise SlurmCommandFailed(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
        return done

    def submit(
        self, command: str, *, gpus: int = 1, account: str = "nlp", name: str = "gg-test", extra: Sequence[str] = ()
    ) -> str:
        """sbatch a job that runs `command` with `gpus` GPUs (--gres=gpu:N); its id (an array's master id)."""
        argv = ["sbatch", "--parsable", f"--account={account}", f"--job-name={name}", f"--gres=gpu:{gpus}",
                f"--output={self.conf_dir / 'job-%j.out'}", "--cpus-per-task=1", *extra,
                f"--wrap={command}"]  # fmt: skip
        return self.cli(argv).stdout.strip().split(";")[0]

    def state(self, job_id: str) -> str:
        """The job's state as slurmctld knows it now (squeue), else as slurmdbd accounted it (sacct)."""
        out = self.cli(["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%T"], check=False).stdout
        if out.strip():
            return out.split()[0]
        out = self.cli(["sacct", "--noheader", "-X", "-P", f"--jobs={job_id}", "--format=State"], check=False).stdout
        return out.split()[0] if out.strip() else ""

    def wait_state(self, job_id: str, *states: str, timeout: float = 60.0) -> str:
        return wait_for(
            f"job {job_id} in {'/'.join(states)}",
            lambda: self.state(job_id) in states and self.state(job_id),
            timeout=timeout,
        )

    def stop(self) -> None:
        """Cancel what still runs first: a job step (slurmstepd) outlives a slurmd killed under it."""
        try:
            self.cli(["scancel", "--full", "--user=root"], check=False, timeout=10)
            wait_for("no job left running", lambda: not self.cli(["squeue", "--noheader"], check=False).stdout.strip(),
                     timeout=15)  # fmt: skip
        except (SlurmTimeout, subprocess.TimeoutExpired, OSError):
            pass  # the daemons are stopped regardless
        self.daemons.stop()
