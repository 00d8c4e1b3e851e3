"""The links a step's data moves over and what moving it costs: GPU to GPU inside a node (NVLink, or PCIe), across
nodes (the NICs), host to GPU (PCIe); FSDP's parameter gathers and gradient reductions per micro-batch, and the
offloaded states' copies. wizard.planner.steptime times the phases with them. Only the standard library is
imported."""

from __future__ import annotations

from typing import Any

# per-direction GPU-to-GPU bandwidth per GPU inside a node: NVLink (datasheets: H100/H200/H20/GH200 NVLink 4 900
# GB/s bidirectional; H800 and A800 cut to 400; A100 600; B200/B300/GB200 NVLink 5 1.8 TB/s; MI300X/MI325X 7
# Infinity Fabric links of 128 GB/s bidirectional, MI355X of 153.6; Ascend 910B HCCS 392 GB/s), or PCIe for cards
# without it (a ring over eight of them crosses PCIe even where bridges pair them: Gen4 x16 32 GB/s per direction,
# the H100 PCIe's Gen5 64)
INTRA_NODE_GB_S = {"H100": 450.0, "H200": 450.0, "H20": 450.0, "GH200": 450.0, "H800": 200.0, "A800": 200.0,
                   "A100": 300.0, "B200": 900.0, "B300": 900.0, "GB200": 900.0, "MI300X": 448.0, "MI325X": 448.0,
                   "MI355X": 538.0, "Ascend910B": 196.0, "H100 PCIe": 64.0, "L40S": 32.0, "L40": 32.0, "L20": 32.0,
                   "A10": 32.0, "A10G": 32.0, "L4": 32.0, "RTX 4090": 32.0, "RTX 3090": 32.0, "A6000": 32.0}
# the NIC share of one GPU across nodes: 400 Gb/s (DGX H100 / HGX reference fabric: one ConnectX-7 per GPU)
NIC_GB_S = 50.0
# FSDP shards the parameters over every GPU (verl 0.9.1 trainer/config/engine/fsdp.yaml:26 fsdp_size -1) and
# gathers them in bf16 for each micro-batch's forward and, resharded after it (fsdp.yaml:23), again for its
# backward, whose gradients are reduce-scattered in fp32 (workers/engine/fsdp/transformer_impl.py:393-394): 2, or
# 2 + 2 + 4 bytes of every parameter (a MoE's every expert, not only the active ones) per micro-batch. NCCL's rings
# move (n − 1)/n of those bytes over every edge: INTRA_NODE_GB_S inside a node; across nodes one ring per NIC, so
# a node's GPUs carry the ring's boundary edges together (gpus per node × NIC_GB_S, 400 GB/s for eight 400 Gb/s
# NICs), at COLLECTIVE_ETA of the slower (a ring's usual share; assumed, not fitted). Prefetching overlaps it with
# the compute: a pass takes the longer of the two.
COLLECTIVE_ETA = 0.7
# host↔GPU copies of offloaded parameters and optimizer states (PCIe Gen4/5 x16 as the engines reach it)
PCIE_GB_S = 20.0


def fsdp_gather_seconds(w: Any, pk_name: str, micros: float, bytes_per_param: float,
                        reduce_bytes: float = 0.0) -> float:
    """Seconds of FSDP parameter all-gathers and gradient reduce-scatters one GPU waits for over `micros`
    micro-batches moving `bytes_per_param` bytes of every parameter each (0 for Megatron or one GPU): ring
    collectives over the GPUs that shard the model (all of them, or fsdp_size) at the slower of the node's GPU link
    (INTRA_NODE_GB_S: NVLink, or PCIe) and, where the shard group spans nodes, the node's NICs together (one ring per
    NIC). With fewer shards than GPUs, each micro-batch's gradient shard (`reduce_bytes` per parameter: verl reduces
    in fp32) is also all-reduced over the replicas, one per shard group, across the NICs (a ring sends 2 (r − 1) / r
    of it; verl syncs every micro-batch: use_no_sync_for_gradient_accumulation false, engine/fsdp.yaml)."""
    n = w.n_gpus
    if w.backend == "megatron" or n <= 1:
        return 0.0
    shards = w.fsdp_size if 0 < w.fsdp_size < n else n
    gpn = max(min(w.gpus_per_node, n), 1)
    link = INTRA_NODE_GB_S.get(pk_name, INTRA_NODE_GB_S["H100"])
    if shards > gpn:
        link = min(link, gpn * NIC_GB_S)
    gather = micros * w.params * bytes_per_param * (shards - 1) / shards / (link * 1e9 * COLLECTIVE_ETA)
    replicas = n // shards
    if replicas <= 1 or not reduce_bytes:
        return gather
    across = NIC_GB_S if n > gpn else INTRA_NODE_GB_S.get(pk_name, INTRA_NODE_GB_S["H100"])  # one node: its GPU link
    reduce = 2 * (replicas - 1) / replicas * reduce_bytes * w.params / shards
    return gather + micros * reduce / (across * 1e9 * COLLECTIVE_ETA)


def params_per_gpu(w: Any) -> float:
    """Parameters one GPU holds in training. FSDP shards every parameter over all GPUs (verl 0.9.1
    trainer/config/engine/fsdp.yaml:26, fsdp_size -1). Megatron splits the dense ones over TP × PP and the experts
    over EP × ETP × PP, and replicates them over data parallel ("bf16 parameter data chunked in model parallel
    group", utils/megatron_utils.py:713-720)."""
    if w.backend != "megatron":
        return w.params / max(w.n_gpus, 1)
    tp = max(w.model_parallel // max(w.context_parallel, 1), 1)
    pp = max(w.pipeline, 1)
    experts = w.routed_params
    return (w.params - experts) / (tp * pp) + experts / (max(w.expert_parallel, 1) * max(w.expert_tp, 1) * pp)


def offload_seconds(w: Any, optimizer: bool = False) -> float:
    """Seconds of one phase's host↔GPU copies of offloaded state, in before the phase and out after it, over PCIe.
    Parameters: FSDP trains fp32 shards (workers/engine/fsdp/transformer_impl.py:260-262), 4 bytes each way;
    Megatron's bf16 parameter buffer per model-parallel rank, 2 bytes each way (megatron_utils.py:827-830; its fp32
    gradients are freed and zeroed, not copied). Optimizer: FSDP's two fp32 Adam moments (8 bytes); Megatron's
    distributed optimizer holds fp32 main parameters and both moments (12 bytes) sharded over every GPU
    (megatron_utils.py:718-719)."""
    megatron = w.backend == "megatron"
    if optimizer:  # LoRA: the adapters' optimizer state only
        per_gpu, nbytes = (w.lora_params or w.params) / max(w.n_gpus, 1), (12 if megatron else 8)
    else:
        per_gpu, nbytes = params_per_gpu(w), (2 if megatron else 4)
    return 2 * nbytes * per_gpu / 1e9 / PCIE_GB_S


__all__ = ["fsdp_gather_seconds", "params_per_gpu", "offload_seconds", "INTRA_NODE_GB_S", "NIC_GB_S",
           "COLLECTIVE_ETA", "PCIE_GB_S"]
