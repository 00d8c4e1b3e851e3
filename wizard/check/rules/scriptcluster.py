"""The Ray cluster a launch script builds itself: its Slurm node list (VI932), where its nodes put Ray's sockets
(VI933), the GPUs a Ray started by verl sees (VI934) and a head with no worker (VI935).

VI932 (error): `nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")` then `nodes_array=("$nodes")`: the quotes
keep the newlines, so the array has ONE element holding every hostname; `head_node=${nodes_array[0]}` names all nodes,
`srun --nodes=1 -w "$head_node"` fails ("Requested node configuration is not available") and `${nodes_array[1]}` is
empty, so no Ray worker starts (verl#548). verl 0.9.1's own tutorial carries it: examples/tutorial/slurm/
ray_on_slurm.slurm:46-49 (then :83 the head's `ray start`, :92-103 the worker loop). The test runs bash on the lines.

VI933 (warning): `ray start ... --temp-dir=DIR` on a multi-node launch, with DIR on a filesystem every node sees
(line numbers of Ray 2.60.0, installed beside verl 0.9.1). A joining node takes the head's temp dir
(ray/_private/node.py:298, 762-771) and the head's session name, so all nodes use DIR/session_*/sockets; each picks
its socket name by what already exists there (node.py:1060-1090 _make_inc_temp, 1241-1270 _prepare_socket_file): the
second node's raylet becomes raylet.1 beside the first one's, and a process reads another machine's AF_UNIX socket
("Could not connect to socket .../sockets/raylet.1", verl#158). verl's ray.init joins that cluster
(trainer/main_ppo.py:57-74). A folder counts as shared when it sits under $HOME, /home or the top folder of a path
every node must read (the model, the data, the checkpoints, #SBATCH --output); under /tmp, /dev/shm, /var/tmp, /run
or $TMPDIR-style variables it is node-local; otherwise nothing is said.

VI934 (error): the script exports CUDA_VISIBLE_DEVICES to a one-node launch where verl starts Ray itself (no `ray
start`, RAY_ADDRESS, `ray job submit` or ray_kwargs.ray_init.address; with trainer.nnodes > 1 a cluster must run
before the script, and ray.init() with no address joins it, ray/_private/services.py:413-440): ray.init (main_ppo.py:57-74) counts only the visible
devices (ray/_private/accelerators/nvidia_gpu.py get_current_process_visible_accelerator_ids), and with fewer than
trainer.nnodes × n_gpus_per_node verl stops in the TaskRunner after Ray and the data are up (ray_trainer.py:772-779,
single_controller/ray/base.py:226-241 "Total available GPUs 1 is less than total desired GPUs 8", verl#372). The value
comes from bash's run of the script (wizard.check.bashtrace keeps CUDA_VISIBLE_DEVICES' value).

VI935 (warning): the script starts a Ray head (`ray start --head`) and no worker (no `ray start` without --head:
no srun, ssh or pdsh fan-out), then asks verl for trainer.nnodes > 1 nodes, or for more GPUs a node than the head's
`--num-gpus`: unless workers join by hand, the cluster is one node and verl stops at base.py:226-241 (or, with nodes
of unequal size, Ray waits on STRICT_PACK placement groups, base.py:131) (verl#242).
"""

from __future__ import annotations

import re
import shlex

from wizard.check.rules.cluster import joins_cluster, script_commands
from wizard.check.rules.context import Ctx, Facts, script_text, submit_words
from wizard.check.rules.slurm import sbatch_options

HOSTNAMES = r"\$\(\s*scontrol\s+show\s+hostnames?\b[^)]*\)"
# nodes=$(scontrol show hostnames ...): the variable that holds the newline-separated list
LIST_VAR = re.compile(r"^\s*(?:(?:local|export|declare|readonly)\s+)?([A-Za-z_]\w*)=\"?" + HOSTNAMES, re.M)
# nodes_array=("$nodes") / nodes_array=("$(scontrol show hostnames ...)"): one element
QUOTED_ARRAY = r"^\s*(?:(?:local|declare(?:\s+-a)?)\s+)?([A-Za-z_]\w*)=\(\s*\"(?:{})\"\s*\)"
RAY_START = re.compile(r"\bray\s+start\b([^\n;&|]*)")
NODE_LOCAL = ("/tmp", "/dev/shm", "/var/tmp", "/run", "/local", "/localscratch", "/scratch/local")
LOCAL_VARS = re.compile(r"^\$\{?(TMPDIR|RAY_TMPDIR|SLURM_TMPDIR|TMP|TEMP|LOCAL_SCRATCH|XDG_RUNTIME_DIR)\b")
SHARED_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "data.train_files", "data.val_files",
               "trainer.default_local_dir")
GPN, NNODES = "trainer.n_gpus_per_node", "trainer.nnodes"


def _logical(text: str) -> str:
    """The script with backslash-continued lines joined."""
    return re.sub(r"\\\n", " ", text)


def ray_starts(text: str) -> list[dict[str, str | bool]]:
    """Each `ray start` of the script: head or worker, and its --temp-dir / --num-gpus / --num-cpus / --address
    words."""
    found: list[dict[str, str | bool]] = []
    for m in RAY_START.finditer(_logical(text)):
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:  # a start inside a quoted ssh/srun command: its closing quote is past the match
            words = [w.strip("'\"") for w in m.group(1).split()]
        opts: dict[str, str | bool] = {"head": "--head" in words}
        for i, w in enumerate(words):
            for name in ("--temp-dir", "--num-gpus", "--num-cpus", "--address"):
                if w == name and i + 1 < len(words):
                    opts[name] = words[i + 1]
                elif w.startswith(name + "="):
                    opts[name] = w[len(name) + 1:]
        found.append(opts)
    return found


def visible_gpus(value: str) -> int:
    """How many GPUs CUDA_VISIBLE_DEVICES=value leaves Ray (nvidia_gpu.py get_current_process_visible_accelerator_ids:
    "" and NoDevFiles are none, else the comma-separated ids)."""
    if value in ("", "NoDevFiles"):
        return 0
    return len(value.split(","))


def rule_slurm_node_list(c: Ctx, f: Facts) -> None:
    """VI932."""
    text = script_commands(c)
    if not text:
        return
    raw = [m.group(1) for m in LIST_VAR.finditer(text)]
    alts = [rf"\${n}|\$\{{{n}\}}" for n in map(re.escape, raw)] + [HOSTNAMES]
    m = re.search(QUOTED_ARRAY.format("|".join(alts)), text, re.M)
    if m is None or not re.search(r"\$\{" + re.escape(m.group(1)) + r"\[", text):
        return
    line = m.group(0).strip()
    arr = m.group(1)
    c.add("VI932", "error", ("target",),
          f"`{line}` makes {arr} ONE element holding every hostname (the quotes keep scontrol's newlines): "
          f"${{{arr}[0]}} names all nodes, so `srun --nodes=1 -w \"${{{arr}[0]}}\"` fails (\"Requested node "
          f"configuration is not available\") and ${{{arr}[1]}} is empty, so no Ray worker starts (verl#548; verl's "
          "examples/tutorial/slurm/ray_on_slurm.slurm:47 has the same line)",
          f"split the list one host an element: `mapfile -t {arr} < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")`"
          + (f" (or {arr}=(${raw[0]}) without quotes)" if raw else ""))


def _shared_roots(c: Ctx, text: str) -> set[str]:
    """Top folders of paths every node must read (the model, the data, the checkpoints, Slurm's log files)."""
    paths: list[str] = []
    for key in SHARED_KEYS:
        value = c.res.flat.get(key)
        paths += [str(p) for p in (value if isinstance(value, list) else [value]) if isinstance(p, str)]
    opts = sbatch_options(text)
    paths += [opts[k] for k in ("output", "error", "chdir") if k in opts]
    return {"/" + p.split("/")[1] for p in paths if p.startswith("/") and len(p.split("/")) > 2
            and not p.startswith(NODE_LOCAL)}


def rule_ray_temp_dir_shared(c: Ctx, f: Facts) -> None:
    """VI933."""
    text = script_text(c)
    if not text:
        return
    starts = ray_starts(script_commands(c))
    dirs = [str(s["--temp-dir"]) for s in starts if isinstance(s.get("--temp-dir"), str)]
    if not dirs:
        return
    nodes = sbatch_options(text).get("nodes", "")
    many = (any(not s["head"] for s in starts) or (f.nnodes or 0) > 1
            or any(int(n) > 1 for n in re.findall(r"\d+", nodes)))
    if not many:
        return
    roots = _shared_roots(c, text)
    for d in dirs:
        if d.startswith(NODE_LOCAL) or LOCAL_VARS.match(d):
            continue
        home = d.startswith(("~", "$HOME", "${HOME}", "/home/"))
        root = "/" + d.split("/")[1] if d.startswith("/") and len(d.split("/")) > 2 else ""
        if not home and root not in roots:
            continue
        why = "under the home folder" if home else f"under {root}, where the run's model/data/logs are shared"
        c.add("VI933", "warning", ("target",),
              f"`ray start --temp-dir={d}` on a multi-node launch puts Ray's sessions {why}: every node that joins "
              "takes the head's temp dir and session (ray/_private/node.py:298, 762-771), so all nodes' raylet and "
              "plasma sockets land in one sockets/ folder (raylet, raylet.1, ...; node.py:1060-1090) and a process "
              "reaches another machine's socket: 'Could not connect to socket .../sockets/raylet.1' (verl#158)",
              "give Ray a node-local temp dir (drop --temp-dir, or --temp-dir=/tmp/ray_$SLURM_JOB_ID); keep only "
              "the model, data and checkpoints on the shared filesystem")
        return


def rule_visible_gpus(c: Ctx, f: Facts) -> None:
    """VI934."""
    ex = c.src.extraction
    value = (ex.temp_env if ex is not None else {}).get("CUDA_VISIBLE_DEVICES")
    if value is None or c.env.get("CUDA_VISIBLE_DEVICES") == value or not f.gpn or not f.nnodes:
        return
    if joins_cluster(c) or RAY_START.search(script_commands(c)) or c.res.flat.get("ray_kwargs.ray_init.num_gpus"):
        return  # a running cluster's GPUs were set where it started; a num_gpus given to ray.init is Ray's to check
    if f.nnodes > 1:
        # several nodes need a cluster started before the script (ray start on each node), and ray.init() with no
        # address joins the one running on this node (ray/_private/services.py:413-440,
        # get_ray_address_from_environment): the cluster's GPUs were set where it started, not by this export
        return
    have, want = visible_gpus(value), f.gpn * f.nnodes
    if have >= want:
        return
    c.add("VI934", "error", ("CUDA_VISIBLE_DEVICES", GPN, NNODES),
          f"CUDA_VISIBLE_DEVICES={value} is exported to a one-node launch where verl starts Ray itself "
          "(main_ppo.py:57-74; no cluster running on this node for ray.init to join): Ray "
          f"sees {have} GPU(s), but {NNODES}={f.nnodes} × {GPN}={f.gpn} asks for {want}; verl stops after Ray and the "
          f"data are up: 'Total available GPUs {have} is less than total desired GPUs {want}' "
          "(single_controller/ray/base.py:226-241, verl#372)",
          f"set {GPN}={have} (and re-check the batch sizes), or "
          "widen CUDA_VISIBLE_DEVICES")


def rule_head_without_workers(c: Ctx, f: Facts) -> None:
    """VI935."""
    starts = ray_starts(script_commands(c))
    if not starts or not all(s["head"] for s in starts) or not f.gpn or not f.nnodes:
        return
    if submit_words(c) is None and c.res.flat.get("ray_kwargs.ray_init.address") not in (None, "auto"):
        return  # verl joins some other cluster
    gpus = next((str(s["--num-gpus"]) for s in starts if isinstance(s.get("--num-gpus"), str)), "")
    short = gpus.isdigit() and int(gpus) < f.gpn
    if f.nnodes <= 1 and not short:
        return
    held = f"{gpus} GPU(s)" if gpus.isdigit() else "its GPUs"
    c.add("VI935", "warning", (NNODES, GPN),
          f"the script starts a Ray head (`ray start --head`{' --num-gpus ' + gpus if gpus else ''}) and no worker "
          f"(no `ray start --address` in it), so its cluster is one node with {held}, but {NNODES}={f.nnodes} × "
          f"{GPN}={f.gpn} asks for {f.nnodes * f.gpn}: unless workers join by hand, verl stops at 'Total available "
          "GPUs ... is less than total desired GPUs' (single_controller/ray/base.py:226-241) or Ray waits on a "
          "placement group that never fits (base.py:131, STRICT_PACK) (verl#242)",
          "start a worker on every other node (`ray start --address=HEAD_IP:6379`, e.g. srun per node as in "
          f"examples/tutorial/slurm/ray_on_slurm.slurm) and check `ray status`, or set {NNODES}=1"
          + (f" {GPN}={gpus}" if short else ""))
