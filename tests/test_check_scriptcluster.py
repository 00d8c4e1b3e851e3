"""VI932-VI935: the Ray cluster a launch script builds itself (wizard/check/rules/scriptcluster.py), each fault planted
beside a valid control, and held to the code that fails: bash for the Slurm node list (verl#548), Ray's own socket
naming for a shared temp dir (verl#158), Ray's GPU count and verl's own resource check for CUDA_VISIBLE_DEVICES
(verl#372) and for a head with no worker (verl#242).
"""

from __future__ import annotations

import collections
import shutil
import subprocess

import pytest

from wizard.check import bashtrace
from wizard.check.lint import check
from wizard.check.rules.scriptcluster import ray_starts, visible_gpus

LAUNCH = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
          "actor_rollout_ref.model.path={model} actor_rollout_ref.rollout.name=vllm "
          "data.train_files={data} data.val_files={data} data.train_batch_size=64 "
          "actor_rollout_ref.actor.ppo_mini_batch_size=32 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.n=4 "
          "trainer.logger=console trainer.n_gpus_per_node={gpn} trainer.nnodes={nnodes}\n")
needs_bash = pytest.mark.skipif(not bashtrace.available(), reason="needs bubblewrap (bash's run of the script)")
SLURM = ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n#SBATCH --cpus-per-task=64\n"
         "#SBATCH --output={out}/slurm-%j.out\n")
NODES = 'nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")\n'
WORKERS = ('for ((i = 1; i < SLURM_JOB_NUM_NODES; i++)); do\n  srun --nodes=1 --ntasks=1 -w "${{nodes_array[$i]}}" '
           'ray start --address "$ip_head" --num-gpus 8 --block &\ndone\n')


def _launch(model="Qwen/Qwen2.5-0.5B-Instruct", data="/shared/data/train.parquet", gpn=8, nnodes=1) -> str:
    return LAUNCH.format(model=model, data=data, gpn=gpn, nnodes=nnodes)


def _hits(tmp_path, script: str, rule: str):
    path = tmp_path / "run.sh"
    path.write_text(script, encoding="utf-8")
    return [f.problem for f in check(str(path)).findings if f.problem.rule == rule]


def _slurm(array_line: str, head: str = 'srun --nodes=1 --ntasks=1 -w "$head_node" ray start --head --block &\n',
           out="/shared/logs") -> str:
    return (SLURM.format(out=out) + NODES + array_line + "head_node=${nodes_array[0]}\nip_head=head:6379\n" + head
            + WORKERS.format() + "srun --overlap --nodes=1 --ntasks=1 -w \"$head_node\" " + _launch(nnodes=2))


# --- VI932: the Slurm node list ----------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("line", "count"), [('nodes_array=("$nodes")', 1), ("nodes_array=($nodes)", 2),
                                             ('mapfile -t nodes_array <<< "$nodes"', 2)])
def test_bash_keeps_a_quoted_node_list_in_one_element(line, count):
    """The oracle: bash itself, with scontrol printing two hosts as Slurm does (one a line)."""
    code = ("scontrol() { printf 'node-a\\nnode-b\\n'; }\n" + NODES + line + "\n"
            'printf "%s|%s|" "${#nodes_array[@]}" "${nodes_array[0]}"')
    out = subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True, timeout=30).stdout
    n, first = out.split("|")[:2]
    assert int(n) == count and (first == "node-a\nnode-b") == (count == 1)


def test_vi932_quoted_node_list(tmp_path):
    [hit] = _hits(tmp_path, _slurm('nodes_array=("$nodes")\n'), "VI932")
    assert hit.severity == "error" and 'nodes_array=("$nodes")' in hit.message and "mapfile -t nodes_array" in hit.hint
    inline = SLURM.format(out="/x") + 'hosts=("$(scontrol show hostnames "$SLURM_JOB_NODELIST")")\n' \
        + 'echo "${hosts[0]}"\n' + _launch()
    assert _hits(tmp_path, inline, "VI932")


@pytest.mark.parametrize("line", ["nodes_array=($nodes)\n",
                                  'mapfile -t nodes_array < <(scontrol show hostnames "$SLURM_JOB_NODELIST")\n',
                                  '# nodes_array=("$nodes")\nnodes_array=($nodes)\n'])
def test_vi932_silent_on_a_split_list(tmp_path, line):
    assert not _hits(tmp_path, _slurm(line), "VI932")


# --- VI933: Ray's temp dir on a shared filesystem ----------------------------------------------------------------

def test_rays_socket_names_collide_in_a_shared_folder(tmp_path):
    """The oracle: Ray's own socket naming (Node._make_inc_temp), run for two nodes. In one shared sockets/ folder
    the second node's raylet becomes raylet.1; in two node-local folders both are `raylet`."""
    from ray._private.node import Node

    def node_socket(folder):
        node = type("N", (), {})()
        node._incremental_dict, node.temp_dir = collections.defaultdict(int), str(folder)
        path = Node._make_inc_temp(node, prefix="raylet", directory_name=str(folder))
        open(path, "w").close()  # the raylet binds it
        return path.rsplit("/", 1)[1]

    shared = tmp_path / "shared" / "sockets"
    shared.mkdir(parents=True)
    assert [node_socket(shared), node_socket(shared)] == ["raylet", "raylet.1"]
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert [node_socket(a), node_socket(b)] == ["raylet", "raylet"]


def test_vi933_temp_dir_beside_the_runs_shared_files(tmp_path):
    head = ('srun --nodes=1 --ntasks=1 -w "$head_node" ray start --head \\\n'
            '    --temp-dir=/traindata/me/ray_clusters --num-gpus 8 --block &\n')
    script = _slurm("nodes_array=($nodes)\n", head=head, out="/traindata/me/logs")
    [hit] = _hits(tmp_path, script, "VI933")
    assert hit.severity == "warning" and "/traindata/me/ray_clusters" in hit.message and "/tmp/ray_" in hit.hint
    home = _slurm("nodes_array=($nodes)\n", head=head.replace("/traindata/me", "$HOME"), out="/x/logs")
    assert _hits(tmp_path, home, "VI933")


@pytest.mark.parametrize("temp", ["/tmp/ray_$SLURM_JOB_ID", "$TMPDIR/ray", "/dev/shm/ray", "/nvme/ray"])
def test_vi933_silent_on_node_local_or_unknown_folders(tmp_path, temp):
    head = f'srun -w "$head_node" ray start --head --temp-dir={temp} --block &\n'
    assert not _hits(tmp_path, _slurm("nodes_array=($nodes)\n", head=head, out="/traindata/me/logs"), "VI933")


def test_vi933_silent_on_one_node(tmp_path):
    script = "#!/bin/bash\nray start --head --temp-dir=$HOME/ray\n" + _launch(nnodes=1)
    assert not _hits(tmp_path, script, "VI933")


def test_ray_starts_reads_each_start():
    text = "ray start --head --temp-dir /a --num-gpus=4 &\nssh w 'ray start --address=h:6379'\n"
    assert ray_starts(text) == [{"head": True, "--temp-dir": "/a", "--num-gpus": "4"},
                                {"head": False, "--address": "h:6379"}]


# --- VI934: CUDA_VISIBLE_DEVICES and the Ray verl starts ------------------------------------------------------------

@pytest.mark.parametrize("value", ["3", "0,1", "", "NoDevFiles", "0,1,2,3,4,5,6,7"])
def test_the_visible_count_is_rays(monkeypatch, value):
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert visible_gpus(value) == len(NvidiaGPUAcceleratorManager.get_current_process_visible_accelerator_ids())


@pytest.mark.verl
@pytest.mark.parametrize(("nodes", "want", "fails"), [([1], [8], True), ([8], [8, 8], True), ([8, 8], [8, 8], False),
                                                      ([4, 2], [3, 3], False)])
def test_verls_resource_check_counts_only_the_total(monkeypatch, nodes, want, fails):
    """The oracle for VI934/VI935: verl's own ResourcePoolManager check on the GPUs Ray reports per node. It raises
    for too few GPUs in all, and passes nodes of 4 + 2 GPUs for two groups of 3 (the STRICT_PACK hang VI814 reports)."""
    import ray
    from verl.single_controller.ray.base import ResourcePoolManager

    monkeypatch.setattr(ray._private.state, "available_resources_per_node",
                        lambda: {f"n{i}": {"GPU": float(g), "CPU": 64.0} for i, g in enumerate(nodes)})
    manager = ResourcePoolManager(resource_pool_spec={"global_pool": want}, mapping={})
    if fails:
        with pytest.raises(ValueError, match="Total available GPUs"):
            manager._check_resource_available()
    else:
        manager._check_resource_available()


@needs_bash
def test_vi934_visible_devices_below_the_request(tmp_path):
    [hit] = _hits(tmp_path, "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=3\n" + _launch(gpn=8), "VI934")
    assert hit.severity == "error" and "CUDA_VISIBLE_DEVICES=3" in hit.message
    assert "trainer.n_gpus_per_node=1" in hit.hint
    assert _hits(tmp_path, "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 " + _launch(gpn=4), "VI934")


@needs_bash
@pytest.mark.parametrize("script", [
    "export CUDA_VISIBLE_DEVICES=0,1,2,3\n" + _launch(gpn=4),  # as many as asked for
    "export CUDA_VISIBLE_DEVICES=3\nray start --head\n" + _launch(gpn=8),  # the script's own cluster (VI935's case)
    "export CUDA_VISIBLE_DEVICES=3\nray job submit --address=http://h:8265 -- " + _launch(gpn=8),  # a running one
    _launch(gpn=8),  # nothing exported
    # several nodes: the cluster runs before the script and ray.init() joins it (verl's own
    # examples/grpo_trainer/run_qwen3_5_122b_a10b_megatron.sh exports 0-7 with nnodes=4)
    "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n" + _launch(gpn=8, nnodes=4),
])
def test_vi934_silent(tmp_path, script):
    assert not _hits(tmp_path, "#!/bin/bash\n" + script, "VI934")


# --- VI935: a head with no worker -----------------------------------------------------------------------------------

def test_vi935_head_only_for_two_nodes(tmp_path):
    [hit] = _hits(tmp_path, "#!/bin/bash\nray start --head\n" + _launch(nnodes=2), "VI935")
    assert hit.severity == "warning" and "trainer.nnodes=2" in hit.message and "ray start --address" in hit.hint
    [short] = _hits(tmp_path, "#!/bin/bash\nray start --head --num-gpus=2\n" + _launch(gpn=8), "VI935")
    assert "--num-gpus 2" in short.message and "trainer.n_gpus_per_node=2" in short.hint


@pytest.mark.parametrize("script", [
    "ray start --head\n" + _launch(nnodes=1),  # one node asked for
    "ray start --head --num-gpus=8\nssh w1 ray start --address=h:6379\n" + _launch(nnodes=2),  # a worker joins
    _launch(nnodes=2),  # no cluster of its own
])
def test_vi935_silent(tmp_path, script):
    assert not _hits(tmp_path, "#!/bin/bash\n" + script, "VI935")
