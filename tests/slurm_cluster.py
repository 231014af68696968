"""A real one-node SLURM cluster on this machine, for the tests of the SLURM profile (tests/test_slurm.py).

Debian's slurm-wlm (slurmctld, slurmd, the client commands), slurmdbd with a private MariaDB server (so that `sacct`
answers, as it does on a real cluster, and as Snakemake's SLURM executor queries it), and munge for authentication,
installed from Debian on demand (as root). Every daemon runs from a private directory (state, spool, logs, sockets,
the database) on ports of its own; only the configuration must be where every SLURM command finds it without
help, /etc/slurm: the executor's job steps drop every SLURM_* variable, SLURM_CONF included, before calling `srun`.
The cluster refuses to start over a /etc/slurm/slurm.conf it did not write, and removes its files when it stops.

The node has this machine's CPUs (two "CPU slots" on the 2-core development machine) and one GPU as a configured
gres (`File=/dev/null`: the scheduler hands it out exactly once at a time, and no device is needed for that).

Run it by hand (as root) to try the profile: `python tests/slurm_cluster.py up DIR` ... `python tests/slurm_cluster.py
down DIR`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurmdbd", "munge", "mariadb-server")
COMMANDS = ("slurmctld", "slurmd", "slurmdbd", "sbatch", "sacct", "scancel", "munged", "mariadbd", "mariadb-install-db")
CONF_DIR = Path("/etc/slurm")
MARKER = "# fwbench test cluster"
MUNGE_KEY = Path("/etc/munge/munge.key")
PORTS = {"slurmctld": 16817, "slurmd": 16818, "slurmdbd": 16819}


class ClusterUnavailable(RuntimeError):
    """This machine cannot host the test cluster (not root, no Debian packages, a foreign SLURM config)."""


def install() -> None:
    """Install the Debian packages the cluster needs, if any command is missing (root only)."""
    if all(shutil.which(command) for command in COMMANDS):
        return
    if os.geteuid() != 0:
        raise ClusterUnavailable("the SLURM test cluster installs slurm-wlm, slurmdbd, munge and MariaDB as root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], check=True, env=env, capture_output=True)
    missing = [command for command in COMMANDS if not shutil.which(command)]
    if missing:
        raise ClusterUnavailable(f"installed {', '.join(PACKAGES)} but {', '.join(missing)} are still missing")


def _memory_mb() -> int:
    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return int(pages * size / 2**20 * 0.8)


@dataclass
class Cluster:
    """The running cluster: its private directory, node name and the environment its commands need."""

    root: Path
    node: str

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def mysql_socket(self) -> Path:
        return self.root / "mysql.sock"

    def slurm_conf(self) -> str:
        r = self.root
        return f"""{MARKER} (tests/slurm_cluster.py); state in {r}
ClusterName=fwbenchtest
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={PORTS["slurmctld"]}
SlurmdPort={PORTS["slurmd"]}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={PORTS["slurmdbd"]}
AccountingStoragePass={self.munge_socket}
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
MinJobAge=3600
ReturnToService=2
MpiDefault=none
KillWait=5
SchedulerParameters=sched_interval=1
NodeName={self.node} CPUs={os.cpu_count()} RealMemory={_memory_mb()} Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

    def slurmdbd_conf(self) -> str:
        r = self.root
        return f"""{MARKER}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost=localhost
DbdPort={PORTS["slurmdbd"]}
SlurmUser=root
PidFile={r}/slurmdbd.pid
LogFile={r}/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=fwbench_slurm_acct
"""


def _wait(what: str, ready, timeout_s: float = 60.0, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
            raise ClusterUnavailable(f"{what} did not come up within {timeout_s:g} s\n{tail}")
        time.sleep(0.3)


def _answers(*command: str) -> bool:
    return subprocess.run(command, capture_output=True).returncode == 0


def start(root: str | os.PathLike) -> Cluster:
    """Install what is missing, write /etc/slurm, start munged, MariaDB, slurmdbd, slurmctld and slurmd, and wait
    until the node takes jobs and sacct answers."""
    if os.geteuid() != 0:
        raise ClusterUnavailable("the SLURM test cluster runs its daemons as root")
    install()
    conf = CONF_DIR / "slurm.conf"
    if conf.exists():
        first = conf.read_text(errors="replace").splitlines()[:1]
        if not first or not first[0].startswith(MARKER):
            raise ClusterUnavailable(f"{conf} exists and is not the test cluster's: not overwriting a real one")
        # A test cluster a killed run left behind: stop its daemons (they hold the ports) before starting anew.
        stop(first[0].rsplit("state in ", 1)[-1])
    cluster = Cluster(Path(root).resolve(), socket.gethostname().split(".")[0])
    r = cluster.root
    for sub in ("state", "spool", "munge", "db"):
        (r / sub).mkdir(parents=True, exist_ok=True)
    (r / "munge").chmod(0o700)
    CONF_DIR.mkdir(parents=True, exist_ok=True)
    conf.write_text(cluster.slurm_conf())
    (CONF_DIR / "gres.conf").write_text(f"{MARKER}\nNodeName={cluster.node} Name=gpu Count=1 File=/dev/null\n")
    dbd_conf = CONF_DIR / "slurmdbd.conf"
    dbd_conf.write_text(cluster.slurmdbd_conf())
    dbd_conf.chmod(0o600)
    if not MUNGE_KEY.exists():
        subprocess.run(["mungekey", "--create", "--keyfile", str(MUNGE_KEY)], check=True, capture_output=True)
    subprocess.run(
        [
            "munged",
            "--force",
            f"--socket={cluster.munge_socket}",
            f"--key-file={MUNGE_KEY}",
            f"--pid-file={r}/munge/munged.pid",
            f"--log-file={r}/munge/munged.log",
            f"--seed-file={r}/munge/seed",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["mariadb-install-db", f"--datadir={r}/db", "--user=root", "--auth-root-authentication-method=normal"],
        check=True,
        capture_output=True,
    )
    subprocess.Popen(
        [
            "mariadbd",
            f"--datadir={r}/db",
            f"--socket={cluster.mysql_socket}",
            "--skip-networking",
            "--user=root",
            f"--pid-file={r}/mariadb.pid",
            f"--log-error={r}/mariadb.log",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _wait("MariaDB", lambda: cluster.mysql_socket.exists(), log=r / "mariadb.log")
    # slurmdbd reaches MariaDB through the client library's default socket, which this variable names.
    subprocess.run(
        ["slurmdbd"], check=True, capture_output=True, env={**os.environ, "MYSQL_UNIX_PORT": str(cluster.mysql_socket)}
    )
    _wait("slurmdbd", lambda: (r / "slurmdbd.pid").exists(), log=r / "slurmdbd.log")
    time.sleep(1.0)
    subprocess.run(["slurmctld"], check=True, capture_output=True)
    subprocess.run(["slurmd"], check=True, capture_output=True)
    _wait("the node", lambda: _node_idle(), log=r / "slurmctld.log")
    _wait("sacct", lambda: _answers("sacct", "-X", "--noheader"), log=r / "slurmdbd.log")
    return cluster


def _node_idle() -> bool:
    out = subprocess.run(["sinfo", "--noheader", "-o", "%t"], capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")


def _signal_pidfile(path: Path) -> int | None:
    """SIGTERM the daemon `path` names; its pid, or None where there is none (any more)."""
    try:
        pid = int(path.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, IndexError):  # no pid file, or the daemon is gone
        return None
    return pid


def stop(root: str | os.PathLike) -> None:
    """Cancel every job, stop every daemon and remove the configuration files the cluster wrote. The daemons are
    signalled together and waited for together (each takes about 2 s to exit: one after the other cost a test
    module 11-24 s); one still running after 15 s is killed."""
    r = Path(root).resolve()
    subprocess.run(["scancel", "--full", "--user=root"], capture_output=True)
    pids = [_signal_pidfile(r / name) for name in ("slurmd.pid", "slurmctld.pid", "slurmdbd.pid", "mariadb.pid")]
    pids.append(_signal_pidfile(r / "munge" / "munged.pid"))
    running = {pid for pid in pids if pid is not None}
    deadline = time.monotonic() + 15
    while running and time.monotonic() < deadline:
        time.sleep(0.2)
        running = {pid for pid in running if _alive(pid)}
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for name in ("slurm.conf", "gres.conf", "slurmdbd.conf"):
        path = CONF_DIR / name
        if path.exists() and MARKER in path.read_text(errors="replace"):
            path.unlink()


def _alive(pid: int) -> bool:
    """Whether `pid` still runs. A daemon that has exited but is a child of this process (MariaDB, started with
    Popen) stays a zombie until reaped, and a zombie still takes signals: reap it, or it counts as running and
    `stop` waits out its 15 s for nothing."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("up", "down"):
        sys.exit("usage: python tests/slurm_cluster.py up|down DIR")
    if sys.argv[1] == "up":
        print(start(sys.argv[2]))
    else:
        stop(sys.argv[2])
