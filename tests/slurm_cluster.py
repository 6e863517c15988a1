"""A real one-node Slurm cluster on 127.0.0.1 for the tests: munged, slurmctld and slurmd started from a generated
slurm.conf in a temporary folder, and stopped (by their process ids) at the end.

Needs root (slurmd starts each job as its user) and Debian's `slurm-wlm` and `munge` packages, which `.ci/run`
installs; `unavailable()` says in one line what is missing. The configuration keeps to what works in a
container: no cgroups (processes are tracked through /proc), no accounting database. Two settings make the
tests quick: a requeued job may start again after 5 s (`cred_expire`; Slurm's default is 120 s) and the
scheduler looks at pending jobs every second.
"""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo")

SLURM_CONF = """\
ClusterName=gsbpolicy-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket,cred_expire=5
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def unavailable() -> str | None:
    """Why a cluster cannot start here (one line), or None."""
    if os.geteuid() != 0:
        return "the Slurm tests start slurmd, which needs root"
    missing = [name for name in (*DAEMONS, *COMMANDS) if shutil.which(name) is None]
    if missing:
        return f"the Slurm tests need Debian's slurm-wlm and munge (apt-get install slurm-wlm munge); missing: {missing}"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SlurmCluster:
    """`start()` brings the three daemons up in `root` and waits for the node to be idle; `stop()` ends them.
    Commands find the cluster through `env` (SLURM_CONF)."""

    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self._processes: list[subprocess.Popen] = []

    def start(self, timeout_s: float = 60.0) -> None:
        # munged refuses a socket folder others cannot traverse, and a key others can read.
        self.root.chmod(0o755)
        for name in ("munge", "state", "spool"):
            (self.root / name).mkdir(mode=0o755)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(SLURM_CONF.format(root=self.root, ctld_port=_free_port(), slurmd_port=_free_port(),
                                               cpus=max(2, os.cpu_count() or 1)))  # fmt: skip
        munge = self.root / "munge"
        self._spawn("munged", ["munged", "-F", f"--key-file={key}", f"--socket={munge / 'munge.socket'}",
                               f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                               f"--seed-file={munge / 'munged.seed'}"])  # fmt: skip
        self._until(lambda: (munge / "munge.socket").exists(), timeout_s, "munged")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["slurmd", "-D", "-N", "localhost"])
        self._until(self._node_idle, timeout_s, "slurmctld and slurmd")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        with (self.root / f"{name}.out").open("w") as out:
            env = {**os.environ, **self.env}
            self._processes.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env))

    def _node_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-o", "%T", check=False)
        return out.returncode == 0 and out.stdout.strip() == "idle"

    def _until(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._processes):
                logs = {p.name: p.read_text()[-2000:] for p in self.root.glob("*.out")}
                self.stop()
                raise RuntimeError(f"{what} did not come up in {self.root}: {logs}")
            time.sleep(0.2)

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm command against this cluster."""
        return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **self.env}, check=check,
                              timeout=60)  # fmt: skip

    def stop(self) -> None:
        """End the daemons (slurmd first, munged last), each by its process id."""
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._processes.clear()
