"""`make cluster-test`: the course's multi-node commands, as the README and notebook 04 print
them, run across two nodes made of network namespaces (`nodes`), at distinct addresses.

Each job is run with one torchrun agent per node, its rendezvous at node 0's address, and
checked as the course's tests check the loopback rehearsal: the README's `whoami` job (every
rank on the node it claims, under that node's hostname), 04's DDP training script (every
replica ends with the same parameters), and 11's 3D mesh (every shard equals one process,
and only data parallel crosses the nodes). Then a job whose nodes share the machine's
hostname, as containers on one host often do: gloo finds the address to bind to through
the hostname, and `GLOO_SOCKET_IFNAME` is what a learner sets. Prints a line per job (pass
or fail, seconds) and exits 1 if any failed or anything of the nodes is left behind.

    python tests/cluster/cluster_check.py [--only whoami mesh ...] [--interrupt-after S]

`--interrupt-after S` runs the check in a child and presses Ctrl-C (SIGINT to its process
group) after S seconds, then checks that nothing is left: no namespace, link or file of
the nodes, no torchrun agent or rank. `python -m course_utils bench simulator --nodes`
runs `simulator_rows` alone. Linux and root only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nodes as netns_nodes
import psutil

REPO = Path(__file__).resolve().parents[2]
RESULTS = "course_utils.ranks.torchrun results: "
FOLDER = "ptc-cluster-"  # the prefix of this run's temporary folder
TIMEOUT = 300  # 8 ranks on 2 cores each import torch first: about a minute for a job


def readme_block(marker: str) -> str:
    """The README's first bash block that mentions `marker`, as a learner copies it."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    return next(b for b in blocks if marker in b)


def readme_command(marker: str) -> str:
    """The README's one-command bash block that mentions `marker`, continuation lines joined
    and the trailing comment dropped."""
    block = readme_block(marker)
    return re.sub(r"\s*#.*$", "", block.replace("\\\n", " ").strip()).strip()


def notebook_04_commands() -> list[str]:
    """The per-node commands notebook 04 printed for its training script, as stored."""
    cells = json.loads((REPO / "notebooks" / "04_data_parallel_ddp.ipynb").read_text())["cells"]
    text = "".join(
        "".join(o.get("text", "")) for c in cells for o in c.get("outputs", []) if "text" in o
    )
    return [m.group(1) for m in re.finditer(r"^on node \d: (.*torchrun_train.*)$", text, re.M)]


def run_job(node_list, per_node_commands: list[list[str]], env: dict, log_dir: Path) -> list:
    """Each node runs its command; rank 0's results line, once every agent has ended."""
    logs = [log_dir / f"node{n.index}.log" for n in node_list]
    agents = []
    for node, argv, log in zip(node_list, per_node_commands, logs, strict=True):
        with open(log, "wb") as out:
            to_log = {"stdout": out, "stderr": subprocess.STDOUT}
            agents.append(subprocess.Popen(node.command(argv), env=env, cwd=REPO, **to_log))
    deadline = time.monotonic() + TIMEOUT
    while any(a.poll() is None for a in agents):
        if any(a.poll() not in (None, 0) for a in agents) or time.monotonic() > deadline:
            for a in agents:
                a.kill()
            break
        time.sleep(0.2)
    texts = [log.read_text(errors="replace") for log in logs]
    codes = [a.wait() for a in agents]
    found = results(texts)
    if found is not None:
        return found
    tails = "\n".join(
        f"[node {n}] {line}" for n, t in enumerate(texts) for line in t.splitlines()[-15:]
    )
    raise RuntimeError(f"no results line; the agents exited {codes}:\n{tails}")


def results(texts: list[str]) -> list | None:
    """What rank 0 reported for every rank, from its results line in any of `texts`."""
    for text in texts:
        for line in text.splitlines():
            if RESULTS in line:
                return json.loads(line.split(RESULTS, 1)[1])
    return None


def _node_env(extra: dict | None = None) -> dict:
    """This venv first on PATH, so `python` and `torchrun` in a command are the course's."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("GLOO_SOCKET_IFNAME", None)
    return {**env, **(extra or {})}


def _for_node(command: str, node, node0) -> list[str]:
    cmd = command.replace("NODE0_ADDRESS", node0.address)
    return shlex.split(re.sub(r"--node-rank=\d", f"--node-rank={node.index}", cmd))


def check_whoami(pair, log_dir) -> str:
    from course_utils.ranks.examples import spread_over_nodes

    command = readme_command("course_utils.ranks.examples:whoami")
    ranks = run_job(pair, [_for_node(command, n, pair[0]) for n in pair], _node_env(), log_dir)
    hosts = {(r["node_rank"], r["host"]) for r in ranks}
    assert spread_over_nodes(ranks, nnodes=2, per_node=4).ok, ranks
    assert hosts == {(0, "node0"), (1, "node1")}, f"ranks' hosts: {sorted(hosts)}"
    return f"{len(ranks)} ranks, hosts {sorted({h for _, h in hosts})}, {ranks[0]['backend']}"


def check_ddp(pair, log_dir) -> str:
    from course_utils.ddp import verdicts

    commands = notebook_04_commands()
    assert len(commands) == 2, f"04's stored output has {len(commands)} node commands"
    argvs = [_for_node(c, n, pair[0]) for c, n in zip(commands, pair, strict=True)]
    ranks = run_job(pair, argvs, _node_env(), log_dir)
    spread, samples = verdicts.digest_spread(ranks), verdicts.samples_per_update(ranks)
    assert spread == 0, f"the replicas' parameter digests differ by {spread}"
    assert samples == len(ranks) * ranks[0]["per_rank_batch"], f"{samples} samples per update"
    return f"{len(ranks)} replicas, digests equal, {samples:g} samples per update"


def check_mesh(pair, log_dir) -> str:
    command = readme_command("course_utils.mesh.mesh_worker")
    ranks = run_job(pair, [_for_node(command, n, pair[0]) for n in pair], _node_env(), log_dir)
    return _judged_mesh(ranks)


def _judged_mesh(ranks: list) -> str:
    """Every shard equals one process's slice, and only data parallel crosses the nodes."""
    from course_utils.core import profiles
    from course_utils.mesh import mesh_runs
    from course_utils.mesh import mesh_verdicts as v
    from course_utils.transformer.model import one_process_steps

    sizes = profiles.current().mesh  # what the worker trains
    run = mesh_runs.summarize(ranks, sizes, one_process_steps(sizes.model, sizes.steps))
    node = {r["rank"]: r["node_rank"] for r in ranks}
    crossing = {d for d, gs in run.groups.items() for g in gs if len({node[r] for r in g}) > 1}
    assert v.mesh_equals_one_process(run.diffs, sizes.tolerance).ok, run.diffs
    assert crossing == {"dp"}, f"dimensions crossing the nodes: {crossing}"
    worst = max(run.diffs.values())
    return f"{len(ranks)} ranks equal one process (worst {worst:.1e}); only dp crosses nodes"


def check_slurm(pair, log_dir) -> str:
    """The README's sbatch script, verbatim, on a real Slurm whose nodes are the namespaces:
    srun starts one torchrun agent per node, which meet at the first node's hostname."""
    import slurm

    job = log_dir / "job"
    job.mkdir()
    (job / "mesh3d.sh").write_text(readme_block("#SBATCH"))
    with slurm.Slurm(pair, log_dir / "slurm") as env:
        submit = pair[0].command(["sh", "-c", f"cd {job} && exec sbatch --wait mesh3d.sh"])
        env = {**_node_env(), "SLURM_CONF": env["SLURM_CONF"]}
        done = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    out = "\n".join(p.read_text(errors="replace") for p in job.glob("slurm-*.out"))
    assert done.returncode == 0, f"sbatch exited {done.returncode}: {done.stderr} {out[-1500:]}"
    ranks = results([out])
    assert ranks is not None, f"the job printed no results line: {out[-1500:]}"
    return f"{done.stdout.strip()}: " + _judged_mesh(ranks)


def check_shared_hostname(pair, log_dir) -> str:
    """Nodes that keep the machine's hostname, which their hosts files do not list: gloo
    cannot resolve it, binds to loopback and tells the other node 127.0.0.1, so the ranks
    never connect; naming the interface (GLOO_SOCKET_IFNAME) fixes it."""
    whoami = readme_command("course_utils.ranks.examples:whoami")
    command = re.sub(r"--nproc-per-node=\d+", "--nproc-per-node=1", whoami)
    shared = [_SharedName(n) for n in pair]
    argvs = [_for_node(command, n, pair[0]) for n in pair]
    try:
        run_job(shared, argvs, _node_env(), log_dir)
        raise AssertionError("the job ran without its nodes' own hostnames")
    except RuntimeError:
        logs = "\n".join(p.read_text(errors="replace") for p in log_dir.glob("*.log"))
    said = [_first(logs, "Unable to resolve hostname"), _first(logs, "connectFullMesh failed")]
    assert all(said), "the job failed, but not as gloo fails to find its address"
    per_node = [{"GLOO_SOCKET_IFNAME": n.node_end} for n in pair]
    ranks = run_job_each_env(shared, argvs, per_node, log_dir)
    assert len(ranks) == 2
    return f"without it: {' ... '.join(said)}; with GLOO_SOCKET_IFNAME set: {len(ranks)} ranks ran"


def _first(text: str, phrase: str) -> str | None:
    """From the first line that says `phrase`: from the phrase to 110 characters on."""
    line = next((line for line in text.splitlines() if phrase in line), None)
    return None if line is None else line[line.index(phrase) :][:110]


class _SharedName:
    """A node that runs commands under the machine's own hostname."""

    def __init__(self, node):
        self.node, self.index, self.node_end = node, node.index, node.node_end

    def command(self, argv):
        return ["ip", "netns", "exec", self.node.namespace, *argv]


def run_job_each_env(node_list, argvs, envs, log_dir) -> list:
    """`run_job` with each node's own environment additions."""
    wrapped = [
        ["env", *(f"{k}={v}" for k, v in extra.items()), *argv]
        for argv, extra in zip(argvs, envs, strict=True)
    ]
    return run_job(node_list, wrapped, _node_env(), log_dir)


# each node's link, each way: slow enough that the wire sets the time. At 100 Mbit/s the
# 1 MiB rows with many short steps came within 0.70-0.76x of the simulator (halving-doubling,
# the ring at N = 8) in most runs; at 50 they came to 0.83-0.91x in two runs of three
RATE_MBIT = 50
CPU_SHARE = 0.25  # a run whose busiest rank computed longer than this share is not judged


def _torchrun(node_list, target: str) -> list[list[str]]:
    """Each node's torchrun command for `course_utils.ranks.torchrun TARGET`, one rank each."""
    common = f"--nnodes={len(node_list)} --nproc-per-node=1 --master-addr={node_list[0].address}"
    rest = ["--master-port=29500", "-m", "course_utils.ranks.torchrun", target, "--backend=gloo"]
    run = ["python", "-m", "torch.distributed.run", *common.split()]
    return [[*run, f"--node-rank={n.index}", *rest] for n in node_list]


def simulator_rows(log_dir) -> list[dict]:
    """The simulator against real, wire-bound runs: one rank per node, every node's link
    shaped to RATE_MBIT each way, so the wire, not the cores, sets the time. The simulator
    is set as `this-machine` sets it, from point-to-point probes between two of the nodes
    (alpha, the one-way rate and the rate each way while both are busy), never from the
    rows it is compared with; each row is the fastest of the repeats on each clock. A row
    whose busiest rank computed more than CPU_SHARE of its wall time is not judged."""
    import sim_worker

    from course_utils.allreduce.runs import time_allreduce
    from course_utils.network.fit import fit_link_terms

    rows = []
    with netns_nodes.Nodes(8, rate_mbit=RATE_MBIT) as eight:
        probe = run_job(eight[:2], _torchrun(eight[:2], PROBE), _node_env(), log_dir)[0]
        terms = fit_link_terms(sim_worker.PROBE_BYTES, probe)
        link = terms.link()
        print(f"simulator set to the probes between two nodes: {terms.as_row()}", flush=True)
        for n in (2, 4, 8):
            real = run_job(eight[:n], _torchrun(eight[:n], TIMED), _node_env(), log_dir)[0]
            names = sim_worker.algorithms_for(n)
            sizes = sim_worker.SIZES
            simulated = time_allreduce(n, sizes, sim_worker.REPEATS, tuple(names), link=link)
            for name in names:
                for k, size in enumerate(sizes):
                    wall, cpu = real[f"{name} {size}"]
                    sim = simulated[name][k]
                    row = {"algorithm": name, "world_size": n, "bytes": size}
                    row["link_mbit"] = RATE_MBIT
                    row.update(real_seconds=round(wall, 6), rank_cpu_seconds=round(cpu, 6))
                    row.update(simulated_seconds=round(sim, 6))
                    row.update(simulated_over_real=round(sim / wall, 3))
                    rows.append({**row, "judged": cpu <= CPU_SHARE * wall})
    return rows


def check_simulator(log_dir) -> str:
    """`simulator_rows`, printed and judged as `bench simulator --nodes` judges them."""
    from course_utils.allreduce.bench_simulator import judge_node_rows

    rows = simulator_rows(log_dir)
    for r in rows:
        mark = f"{r['simulated_over_real']:.2f}x" if r["judged"] else "not judged"
        line = f"  {r['algorithm']:>16} N={r['world_size']} {r['bytes'] >> 20} MiB: "
        line += f"real {r['real_seconds']:.3f} s (cpu {r['rank_cpu_seconds']:.3f} s), "
        print(f"{line}simulated {r['simulated_seconds']:.3f} s: {mark}", flush=True)
    met, summary = judge_node_rows(rows)
    assert met, summary
    return summary


PROBE = "tests/cluster/sim_worker.py:link_probe"
TIMED = "tests/cluster/sim_worker.py:time_algorithms"

CHECKS = {
    "whoami": check_whoami,
    "ddp": check_ddp,
    "mesh": check_mesh,
    "hostname": check_shared_hostname,
    "slurm": check_slurm,
}


OURS = (
    "torch.distributed.run",
    "-m course_utils.ranks.torchrun",
    "-m course_utils.mesh.mesh_worker",
)
OURS += ("-m course_utils.ddp.torchrun_train",)  # torchrun's workers, started by `-m`
OURS += (f"/{FOLDER}",)  # munged, named by its socket in our folder
DAEMONS = ("slurmctld", "slurmd", "slurmstepd")  # ours when their SLURM_CONF is in our folder


def ours_running() -> list[str]:
    """torchrun agents and ranks of the course still running anywhere on the machine."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if any(name in line for name in OURS) or _our_daemon(p):
            found.append(f"{p.info['pid']} {line[:100]}")
    return found


def everything_left() -> list[str]:
    """Namespaces, links, files, folders and processes of ours that still exist."""
    folders = [str(p) for p in Path(tempfile.gettempdir()).glob(f"{FOLDER}*")]
    return netns_nodes.leftovers() + ours_running() + [f"folder {f}" for f in folders]


def _our_daemon(process) -> bool:
    try:
        conf = process.environ().get("SLURM_CONF", "") if process.name() in DAEMONS else ""
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return f"/{FOLDER}" in conf


def _one_check(name: str, check, folder: Path) -> bool:
    began = time.monotonic()
    log_dir = folder / name
    log_dir.mkdir()
    try:
        said, ok = check(log_dir), True
    except (AssertionError, RuntimeError) as exc:
        said, ok = f"{type(exc).__name__}: {exc}"[:2000], False
    print(
        f"{'pass' if ok else 'FAIL'} {name} ({time.monotonic() - began:.0f} s): {said}", flush=True
    )
    return ok


def run_checks(only: list[str]) -> int:
    failed = []
    # the nodes end first, and every process in them, then their folder goes
    with tempfile.TemporaryDirectory(prefix=FOLDER) as tmp:
        on_two = [name for name in only if name in CHECKS]
        if on_two:
            with netns_nodes.Nodes(2) as pair:
                print(f"nodes: {', '.join(f'{n.hostname} {n.address}' for n in pair)}")
                for name in on_two:
                    check = lambda log_dir, name=name: CHECKS[name](pair, log_dir)  # noqa: E731
                    failed += [] if _one_check(name, check, Path(tmp)) else [name]
        if "simulator" in only and not _one_check("simulator", check_simulator, Path(tmp)):
            failed.append("simulator")
    left = everything_left()
    print(f"left behind: {left or 'nothing'}")
    return 1 if failed or left else 0


def interrupted_run(only: list[str], after: float) -> int:
    """This check in a child of its own session, Ctrl-C'd after `after` s, then nothing left."""
    child = subprocess.Popen([sys.executable, __file__, "--only", *only], start_new_session=True)
    try:
        child.wait(timeout=after)
        print(f"the check ended by itself before {after:g} s: nothing was interrupted")
        return 1
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGINT)
    code = child.wait(timeout=60)
    deadline = time.monotonic() + 10
    while (left := everything_left()) and time.monotonic() < deadline:
        time.sleep(0.2)
    print(f"Ctrl-C after {after:g} s: the check exited {code}; left behind: {left or 'nothing'}")
    return 1 if left else 0


def install_slurm() -> bool:
    """Slurm and munge from Debian's packages, if they are not here yet; a daemon the
    install started (none does without systemd) is stopped before ours start."""
    import slurm

    if slurm.missing():
        print(f"installing {' '.join(slurm.PACKAGES)} (apt-get)", flush=True)
        quiet = {"stdout": subprocess.DEVNULL}
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, **quiet)
        install = ["apt-get", "install", "-y", "-qq", *slurm.PACKAGES]
        if subprocess.run(install, env=env, **quiet).returncode != 0 or slurm.missing():
            print("cluster-test: could not install Slurm; install it, or run --only without slurm")
            return False
        for name in (*slurm.DAEMONS, "munged"):  # what the install may have started
            subprocess.run(["pkill", "-x", name], capture_output=True)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = [*CHECKS, "simulator"]
    parser.add_argument("--only", nargs="+", default=every, choices=every)
    parser.add_argument("--interrupt-after", type=float, default=None)
    args = parser.parse_args()
    problem = netns_nodes.unsupported()
    if problem:
        print(f"cluster-test: {problem}.")
        return 1
    if "slurm" in args.only and not install_slurm():
        return 1
    if args.interrupt_after is not None:
        return interrupted_run(args.only, args.interrupt_after)
    try:
        return run_checks(args.only)
    except KeyboardInterrupt:
        print("interrupted: the nodes and everything in them were torn down")
        return 130


if __name__ == "__main__":
    sys.exit(main())
