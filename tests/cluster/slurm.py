"""A real Slurm on the namespace nodes (`nodes`), for the README's sbatch script to run as a
learner's cluster would: Debian's Slurm 22.05 and munge, configured in a temporary folder
(`SLURM_CONF`), with slurmctld on node0 and one slurmd per node, each in its node's namespace.

The nodes are declared as the script expects: 16 CPUs (`config_overrides`: this machine
has 2) and 4 GPUs each, counted through stand-in device nodes in the folder (major 195, as
NVIDIA's; Slurm drops a GPU without a device file, and nothing opens these). slurmd needs a
cgroup hierarchy: `ip netns exec` gives each node a fresh /sys, so the v1 controllers are
mounted there, in the node's own mount namespace, and leave with it. munge runs on the host
with its own key and socket in the folder. Nothing outside the folder is written; `stop`
ends every daemon, and the nodes' teardown ends whatever ran inside them.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
PROGRAMS = ("slurmctld", "slurmd", "sbatch", "munged")
CGROUPS = "cpu cpuacct cpuset memory devices freezer pids blkio"
DAEMONS = ("slurmctld", "slurmd", "slurmstepd")


def missing() -> list[str]:
    """Debian's packages to install before Slurm can run here (none when they are)."""
    return [] if all(shutil.which(p) for p in PROGRAMS) else list(PACKAGES)


def config(folder: Path, node_list) -> str:
    nodes = "".join(
        f"NodeName={n.hostname} NodeAddr={n.address} CPUs=16 Gres=gpu:4 State=UNKNOWN\n"
        for n in node_list
    )
    names = ",".join(n.hostname for n in node_list)
    return f"""ClusterName=course
SlurmctldHost={node_list[0].hostname}({node_list[0].address})
AuthType=auth/munge
AuthInfo=socket={folder}/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool-%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
{nodes}PartitionName=main Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """`with Slurm(nodes, folder) as env:` Slurm up on `nodes`; `env` has its SLURM_CONF."""

    def __init__(self, node_list, folder: Path):
        self.nodes, self.folder, self.daemons = node_list, Path(folder), []
        self.env = {**os.environ, "SLURM_CONF": str(self.folder / "slurm.conf")}

    def _write(self) -> None:
        f = self.folder
        for sub in ("state", "dev", *(f"spool-{n.hostname}" for n in self.nodes)):
            (f / sub).mkdir(parents=True)
        for i in range(4):
            os.mknod(f / "dev" / f"gpu{i}", stat.S_IFCHR | 0o600, os.makedev(195, i))
        (f / "slurm.conf").write_text(config(f, self.nodes))
        (f / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={f}/dev/gpu[0-3]\n")
        (f / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        (f / "munge.key").write_bytes(os.urandom(1024))
        (f / "munge.key").chmod(0o600)

    def __enter__(self) -> dict:
        self._write()
        f = self.folder
        files = [f"--{k}={f}/munge{v}" for k, v in (("key-file", ".key"), ("socket", ".socket"))]
        files += [f"--{k}-file={f}/munged.{k}" for k in ("pid", "log", "seed")]
        subprocess.run(["munged", "--force", *files], check=True)
        try:
            self._start(self.nodes[0], ["slurmctld", "-D", "-c"], "slurmctld")
            mount = f"mount -t tmpfs none /sys/fs/cgroup && for c in {CGROUPS}; do mkdir "
            mount += "/sys/fs/cgroup/$c && mount -t cgroup -o $c none /sys/fs/cgroup/$c; done"
            for n in self.nodes:
                slurmd = ["sh", "-c", f'{mount} && exec slurmd -D -N "$0"', n.hostname]
                self._start(n, slurmd, f"slurmd-{n.hostname}")
            self._wait_until_idle()
        except BaseException:
            self.stop()
            raise
        return self.env

    def _start(self, node, argv: list[str], name: str) -> None:
        with open(self.folder / f"{name}.out", "wb") as out:
            self.daemons.append(
                subprocess.Popen(node.command(argv), env=self.env, stdout=out, stderr=out)
            )

    def _wait_until_idle(self, seconds: float = 60) -> None:
        sinfo = self.nodes[0].command(["sinfo", "-N", "-h", "-o", "%t"])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            states = subprocess.run(sinfo, env=self.env, capture_output=True, text=True).stdout
            if states.split() == ["idle"] * len(self.nodes):
                return
            time.sleep(0.5)
        logs = (self.folder / "slurmctld.log").read_text(errors="replace").splitlines()[-10:]
        raise RuntimeError(f"the Slurm nodes were not idle after {seconds:g} s: {logs}")

    def stop(self) -> None:
        for daemon in self.daemons:
            if daemon.poll() is None:
                daemon.kill()
            daemon.wait(timeout=10)
        pid_file = self.folder / "munged.pid"  # munged forks itself away: its pid is here
        if pid_file.exists():
            pid = int(pid_file.read_text())
            deadline = time.monotonic() + 5  # until it has gone, and written its seed file
            try:
                os.kill(pid, signal.SIGTERM)
                while time.monotonic() < deadline:
                    os.kill(pid, 0)
                    time.sleep(0.05)
            except ProcessLookupError:
                pass

    def __exit__(self, *exc) -> None:
        self.stop()
