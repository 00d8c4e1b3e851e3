"""The questionnaire as data: coverage of `Answers`, `when` conditions, parsing and planner/probe defaults."""

from __future__ import annotations

from typing import get_args

import pytest

from wizard.cli.interactive import questions as qs
from wizard.intent.answers import Answers
from wizard.env.probe import GpuReport, HostReport, Probes, RayReport
from wizard.cli.interactive.questions import (
    BY_FIELD,
    DECISIONS,
    NOT_ASKED,
    QUESTIONS,
    RELATED,
    Context,
    applicable,
    choices_for,
    default_for,
    offered,
    parse,
    refusal,
)


def asked(advanced: bool = False, **answers) -> list[str]:
    """The questions asked with these answers (and with "adjust advanced settings?" answered `advanced`)."""
    ctx = Context(answers=answers, base_dir="/r", decisions={"advanced": advanced})
    return [q.field for q in applicable(ctx)]


# --- every field is asked or deliberately not asked -----------------------------------------------------------


def test_every_answers_field_is_asked_or_listed_as_not_asked():
    fields = set(Answers.model_fields)
    in_questions = [q.field for q in QUESTIONS if q.field not in DECISIONS]
    decided = {f for q in QUESTIONS if q.field in DECISIONS for f in q.owns}
    assert decided <= set(in_questions) | fields and not set(DECISIONS) & fields
    assert len(in_questions) == len(set(in_questions)), "a field is asked twice"
    assert not set(in_questions) & set(NOT_ASKED), sorted(set(in_questions) & set(NOT_ASKED))
    assert set(in_questions) | set(NOT_ASKED) == fields, {
        "neither asked nor listed": sorted(fields - set(in_questions) - set(NOT_ASKED)),
        "not a field": sorted((set(in_questions) | set(NOT_ASKED)) - fields)}
    assert all(reason.strip() for reason in NOT_ASKED.values())


def test_related_questions_exist():
    for rule, fields in RELATED.items():
        assert rule.startswith("VI") and set(fields) <= set(BY_FIELD), rule


def test_prompts_reuse_the_field_descriptions():
    for q in QUESTIONS:
        desc = DECISIONS[q.field] if q.field in DECISIONS else Answers.model_fields[q.field].description
        assert desc and q.message() == f"{q.field} — {desc}"


@pytest.mark.parametrize("name", ["cluster", "algorithm", "reward", "rollout_engine", "train_backend", "answer_format"])
def test_select_choices_are_exactly_the_allowed_values(name):
    values = [v for v, _ in choices_for(BY_FIELD[name], Context())]
    ann = Answers.model_fields[name].annotation
    allowed = [a for a in get_args(ann) if a is not type(None)]
    allowed = list(get_args(allowed[0])) if len(allowed) == 1 and get_args(allowed[0]) else allowed
    assert sorted(values) == sorted(allowed)
    assert BY_FIELD[name].kind == "select"


def test_logger_choices_are_the_trackers():
    assert [v for v, _ in choices_for(BY_FIELD["logger"], Context())] == list(get_args(get_args(
        Answers.model_fields["logger"].annotation)[0]))


# --- when ------------------------------------------------------------------------------------------------------


def test_local_grpo_asks_no_cluster_critic_or_reward_model_questions():
    fields = asked()
    for never in ("nnodes", "critic_model", "reward_model", "reward_function", "image", "k8s_namespace", "k8s_secret",
                  "shared_pvc", "shm_size_gb", "slurm_partition", "slurm_account", "slurm_time", "question_field",
                  "model_params_b", "gpus_per_node", "gpu_memory_gb", "gpu_type"):
        assert never not in fields
    # one question per decision; the rest only after "adjust advanced settings?"
    assert fields == ["cluster", "gpus", "algorithm", "model", "dataset", "reward", "prompts_per_step", "advanced"]
    assert {"rollout_engine", "train_backend", "lora_rank", "max_prompt_length", "samples_per_prompt",
            "updates_per_step", "host_memory_gb"} <= set(asked(advanced=True))


def test_other_gpus_ask_count_memory_and_model():
    ctx = Context(base_dir="/r", decisions={"gpus": qs.OTHER})
    assert {"gpus_per_node", "gpu_memory_gb", "gpu_type"} <= {q.field for q in applicable(ctx)}


def test_kuberay_only_questions():
    fields = set(asked(cluster="kuberay", advanced=True))
    assert {"nnodes", "image", "k8s_namespace", "k8s_secret", "shared_pvc", "shm_size_gb"} <= fields
    assert {"nnodes", "shared_pvc"} <= set(asked(cluster="kuberay")) and "k8s_namespace" not in asked(cluster="kuberay")
    assert not {"slurm_partition", "slurm_account", "slurm_time"} & fields


def test_slurm_only_questions():
    fields = set(asked(cluster="slurm", advanced=True))
    assert {"nnodes", "image", "slurm_partition", "slurm_account", "slurm_time"} <= fields
    assert not {"k8s_namespace", "k8s_secret", "shared_pvc", "shm_size_gb"} & fields
    assert not {"image", "k8s_namespace", "slurm_partition"} & set(asked(cluster="ray")) and "nnodes" in asked(cluster="ray")


def test_critic_only_for_algorithms_that_train_one():
    from wizard.verlspec.algorithms import ALGORITHMS

    for name, algo in ALGORITHMS.items():
        assert ("critic_model" in asked(algorithm=name, advanced=True)) == algo.critic, name


def test_reward_model_and_function_only_when_chosen():
    assert "reward_model" in asked(reward="model") and "reward_function" not in asked(reward="model")
    assert "reward_function" in asked(reward="function") and "reward_model" not in asked(reward="function")
    assert "reward_model" in asked(reward="genrm") and "judge_gpus" not in asked(reward="genrm")  # cluster=local
    assert "judge_gpus" in asked(reward="genrm", cluster="ray") and "judge_gpus" not in asked(reward="model", cluster="ray")
    assert "judge_max_tokens" in asked(reward="genrm", advanced=True) and "judge_max_tokens" not in asked(reward="genrm")


def test_lora_asked_with_every_backend():
    """verl 0.9.1 trains LoRA on Megatron too (Megatron-Bridge PEFT: tests/test_lora_megatron.py)."""
    assert "lora_rank" in asked(train_backend="megatron", advanced=True)
    assert "lora_rank" in asked(train_backend="fsdp2", advanced=True)


def test_model_size_asked_only_when_unknown(tmp_path):
    assert "model_params_b" not in asked(model="Qwen/Qwen2.5-7B-Instruct")
    assert "model_params_b" not in asked(model="someone/my-3b-chat")  # size in the name
    assert "model_params_b" in asked(model="someone/policy")
    local = tmp_path / "m"
    local.mkdir()
    (local / "config.json").write_text('{"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
                                       '"num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100}')
    assert "model_params_b" not in asked(model=str(local))


def test_local_data_file_questions():
    assert {"question_field", "answer_field", "answer_format"} <= set(asked(dataset="data/qa.csv"))
    assert not {"question_field", "answer_field", "answer_format"} & set(asked(dataset="math"))


# --- parse ----------------------------------------------------------------------------------------------------


def test_parse_types_ranges_and_optional_blanks():
    assert parse(BY_FIELD["gpus_per_node"], " 4 ") == (4, None)
    assert parse(BY_FIELD["gpus_per_node"], "four")[1].startswith("a whole number")
    value, error = parse(BY_FIELD["gpus_per_node"], "17")
    assert value is None and "[VI102]" in error and "≤ 16" in error
    assert parse(BY_FIELD["gpu_memory_gb"], "24.5") == (24.5, None)
    assert parse(BY_FIELD["gpu_memory_gb"], "lots")[1].startswith("a number")
    assert parse(BY_FIELD["samples_per_prompt"], "") == (None, None)  # optional: verl-init chooses
    assert parse(BY_FIELD["model"], "")[1] == "an answer is needed"
    assert "[VI102]" in parse(BY_FIELD["k8s_namespace"], "Not_DNS")[1]
    assert "[VI102]" in parse(BY_FIELD["reward_function"], "score.py")[1]
    assert "[VI510]" in parse(BY_FIELD["dataset"], "squad")[1] and "[VI539]" in parse(BY_FIELD["dataset"], "x.parquet")[1]


# --- defaults ----------------------------------------------------------------------------------------------------


def _probes(gpus: GpuReport | None = None, ray: RayReport | None = None) -> Probes:
    return Probes(gpus or GpuReport(False, "no NVIDIA GPU found"),
                  ray or RayReport("http://127.0.0.1:8265", "default", False), HostReport(memory_gb=256.0))


def test_defaults_without_probes_are_the_field_defaults():
    ctx = Context()
    for q in QUESTIONS:
        if q.field in ("prompts_per_step", "lora_rank") or q.field in DECISIONS:
            continue  # planner-derived, or a decision (below)
        if q.field == "checkpoint_pvc":  # a suggested name: without one, KubeRay checkpoints are refused (VI757)
            assert default_for(q, ctx) == "verl-checkpoints" and q.optional
            continue
        d = default_for(q, ctx)
        if q.optional:
            assert d is None, q.field
        elif q.field == "nnodes":
            assert d == 1
        else:
            assert d == Answers.model_fields[q.field].get_default(call_default_factory=True), q.field
    assert default_for(BY_FIELD["nnodes"], Context(answers={"cluster": "kuberay"})) == 2
    assert default_for(BY_FIELD["gpus"], ctx) == "8x H100 80GB" and default_for(BY_FIELD["advanced"], ctx) is False


def test_a_given_answer_is_the_default_when_asked_again():
    assert default_for(BY_FIELD["gpus_per_node"], Context(answers={"gpus_per_node": 3})) == 3


def test_ray_probe_defaults(monkeypatch):
    from wizard.env.cluster import Node, Observed

    obs = Observed("http://h:8265", "2.60.0", [Node("a", "10.0.0.1", True, True, 0, 8),
                                               Node("b", "10.0.0.2", True, False, 8, 64),
                                               Node("c", "10.0.0.3", True, False, 4, 64)])
    ray = RayReport("http://h:8265", "RAY_ADDRESS", True, observed=obs)
    ctx = Context(probes=_probes(ray=ray))
    assert qs.default_cluster(ctx) == "ray"
    ctx.answers["cluster"] = "ray"
    assert qs.default_nnodes(ctx) == 2 and qs.default_gpus_per_node(ctx) == 4
    assert "VI747" in [p.rule for p in ray.findings()]
    not_explicit = RayReport("http://127.0.0.1:8265", "default", False, observed=Observed(
        "http://127.0.0.1:8265", "2.60.0", [Node("a", "127.0.0.1", True, True, 2, 8)]))
    assert qs.default_cluster(Context(probes=_probes(ray=not_explicit))) == "local"  # a one-node local head


def test_probed_facts_only_for_this_machine():
    from wizard.env.probe import Gpu

    g = GpuReport(True, gpus=[Gpu(0, "NVIDIA L40S", 48.3, 48.0)])
    ctx = Context(answers={"cluster": "local"}, probes=_probes(gpus=g))
    assert [v for v, _ in qs.gpus_choices(ctx)][0] == qs.THIS_MACHINE and qs.default_gpus(ctx) == qs.THIS_MACHINE
    assert qs.apply_gpus(qs.THIS_MACHINE, ctx) == {"gpus_per_node": 1, "gpu_type": "L40S", "gpu_memory_gb": 48.3,
                                                   "host_memory_gb": 256.0}
    assert qs.apply_gpus("8x H100 80GB", ctx) == {"gpus_per_node": 8, "gpu_type": "H100", "gpu_memory_gb": 80.0}
    ctx.answers["cluster"] = "slurm"  # the job runs elsewhere: this machine is not offered
    assert qs.THIS_MACHINE not in [v for v, _ in qs.gpus_choices(ctx)] and qs.default_gpus(ctx) == "8x H100 80GB"
    no_gpu = Context(answers={"cluster": "local"}, probes=_probes())
    assert qs.THIS_MACHINE not in [v for v, _ in qs.gpus_choices(no_gpu)] and qs.default_gpus(no_gpu) == "8x H100 80GB"


def test_choosing_gpus_fills_and_clears_their_fields():
    from wizard.env.probe import Gpu

    g = GpuReport(True, gpus=[Gpu(0, "NVIDIA L40S", 48.3, 48.0)])
    ctx = Context(answers={"cluster": "local"}, probes=_probes(gpus=g))
    qs.give(BY_FIELD["gpus"], qs.THIS_MACHINE, ctx)
    assert ctx.answers["host_memory_gb"] == 256.0
    qs.give(BY_FIELD["gpus"], "8x A100 40GB", ctx)  # a change of mind: this machine's host memory goes too
    assert "host_memory_gb" not in ctx.answers and ctx.answers["gpu_memory_gb"] == 40.0


def test_prompts_per_step_default_divides_for_any_gpu_count():
    from wizard.planner.pipeline import plan

    for gpus in (1, 2, 3, 5, 6, 7, 8, 12):
        ctx = Context(answers={"gpus_per_node": gpus, "gpu_memory_gb": 80}, base_dir="/r")
        p = qs.default_prompts_per_step(ctx)
        plan(Answers(gpus_per_node=gpus, gpu_memory_gb=80, prompts_per_step=p), base_dir="/r")  # does not raise
        assert abs(p - 256) <= qs._batch_step(ctx), (gpus, p)


def test_lora_is_asked_with_the_ranks_that_fit_when_all_weights_do_not():
    """The real planner: 7B GRPO on 4 × 24 GB fits only with LoRA; on 8 × 80 GB all weights fit."""
    ctx = Context(answers={"gpus_per_node": 4, "gpu_memory_gb": 24, "model": "Qwen/Qwen2.5-7B-Instruct"},
                  asked={"gpus", "model"}, base_dir="/r")
    assert qs.full_misfits(ctx) and "lora_rank" in [q.field for q in applicable(ctx)]  # not advanced: asked
    ranks = [v for v, _ in qs.offered(BY_FIELD["lora_rank"], ctx)]
    assert 0 not in ranks and 32 in ranks and default_for(BY_FIELD["lora_rank"], ctx) == 32
    assert "training all weights does not fit these GPUs; LoRA ranks that fit: " in qs.lora_note(ctx)
    assert "[VI602]" in (qs.refusal(BY_FIELD["lora_rank"], 0, ctx) or "")
    big = Context(answers={"gpus_per_node": 8, "gpu_memory_gb": 80}, base_dir="/r")
    assert not qs.full_misfits(big) and default_for(BY_FIELD["lora_rank"], big) == 0
    assert "lora_rank" not in [q.field for q in applicable(big)]  # an advanced setting then
    nothing = Context(answers={"gpus_per_node": 1, "gpu_memory_gb": 24, "model": "Qwen/Qwen2.5-7B-Instruct",
                               "algorithm": "ppo"}, asked={"gpus", "model", "algorithm"}, base_dir="/r")
    assert qs.fitting_ranks(nothing) == [] and "lora_rank" not in [q.field for q in applicable(nothing)]
    assert "[VI602]" in (qs.refusal(BY_FIELD["model"], "Qwen/Qwen2.5-7B-Instruct", nothing) or "")


def test_prompts_per_step_choices_pass_the_batch_rules_and_the_data(tmp_path):
    (tmp_path / "qa.jsonl").write_text("".join(f'{{"question": "{i}", "answer": "{i}"}}\n' for i in range(200)))
    ctx = Context(answers={"dataset": "qa.jsonl"}, asked={"dataset", "gpus"}, base_dir=str(tmp_path))
    q = BY_FIELD["prompts_per_step"]
    values = [v for v, _ in qs.offered(q, ctx)]
    assert values and max(values) <= 190 and 256 not in values
    assert default_for(q, ctx) == max(values)
    why = qs.refusal(q, 256, ctx)
    assert why is not None and "190 training row(s)" in why and "[VI519]" in why
    six = Context(answers={"gpus_per_node": 6}, asked={"gpus"}, base_dir=str(tmp_path))
    assert all(v % 24 == 0 for v, _ in qs.offered(q, six)) and "[VI202]" in (qs.refusal(q, 100, six) or "")


def test_a_missing_data_file_is_refused_with_the_fix(tmp_path):
    ctx = Context(base_dir=str(tmp_path))
    value, error = parse(BY_FIELD["dataset"], "mydata/nope.jsonl", ctx)
    assert value is None and "no file 'mydata/nope.jsonl' here" in error and "give the path of an existing" in error
    (tmp_path / "mydata").mkdir()
    (tmp_path / "mydata" / "nope.jsonl").write_text('{"question": "q", "answer": "1"}\n')
    assert parse(BY_FIELD["dataset"], "mydata/nope.jsonl", ctx) == ("mydata/nope.jsonl", None)


def test_an_answer_is_refused_only_when_no_later_question_can_fix_it():
    """6 GPUs with the default 256 prompts breaks VI202, but prompts_per_step is still to come: not refused."""
    ctx = Context(answers={"gpu_memory_gb": 80}, asked=set(), base_dir="/r", decisions={"gpus": qs.OTHER})
    assert qs.refusal(BY_FIELD["gpus_per_node"], 6, ctx) is None
    ctx.asked |= {"gpus_per_node", "prompts_per_step"}
    ctx.answers.update(gpus_per_node=8, prompts_per_step=256)
    assert "[VI202]" in (qs.refusal(BY_FIELD["gpus_per_node"], 6, ctx) or "")


def test_a_broken_default_falls_back_to_the_field_default(monkeypatch):
    def boom(ctx):
        raise RuntimeError("probe bug")

    q = qs.Question("gpus_per_node", "int", "hardware", default=boom)
    assert default_for(q, Context()) == 8


# --- multi-turn tool calling and vision-language answers: asked only when they apply ---------------------------


def test_agent_is_an_advanced_setting_and_its_tool_and_turns_follow_agent_tool():
    assert not {"agent", "tool", "max_turns"} & set(asked())  # the defaults walk is unchanged
    assert "agent" in asked(advanced=True) and not {"tool", "max_turns"} & set(asked(advanced=True))
    fields = asked(advanced=True, agent="tool")
    assert fields.index("max_response_length") < fields.index("agent") < fields.index("tool") < fields.index("max_turns")
    assert [v for v, _ in choices_for(BY_FIELD["agent"], Context())] == ["single_turn", "tool"]


def test_agent_answers_are_checked_against_the_planner():
    ctx = Context(answers={"agent": "tool"}, base_dir="/r", decisions={"advanced": True},
                  asked={"advanced", "max_response_length", "agent"})
    too_many = refusal(BY_FIELD["max_turns"], 8, ctx)  # 7 tool replies × 256 tokens fill max_response_length=1024
    assert too_many and "[VI562]" in too_many and "max_turns ≤ 3" in too_many
    assert refusal(BY_FIELD["max_turns"], 3, ctx) is None
    assert "[VI563]" in (refusal(BY_FIELD["tool"], "no_such_tool_module_xyz.Tool", ctx) or "")
    assert refusal(BY_FIELD["tool"], None, ctx) is None  # empty: the bundle's gsm8k tool
    value, error = parse(BY_FIELD["tool"], "my tool", ctx)
    assert value is None and "tool" in error
    # a math dataset: the gsm8k tool checks numbers (VI561), refused once the tool is the open question
    math = Context(answers={"agent": "tool", "dataset": "math"}, base_dir="/r", decisions={"advanced": True},
                   asked={"advanced", "agent", "dataset"})
    assert "[VI561]" in (refusal(BY_FIELD["tool"], "gsm8k", math) or "")


def test_tool_agent_on_kuberay_is_not_refused():
    ctx = Context(answers={"cluster": "kuberay", "nnodes": 2, "shared_pvc": "rl"}, base_dir="/r",
                  decisions={"advanced": True}, asked={"advanced", "cluster", "nnodes", "shared_pvc"})
    assert refusal(BY_FIELD["agent"], "tool", ctx) is None


VL = "Qwen/Qwen2.5-VL-3B-Instruct"


def test_vision_questions_only_for_a_vision_language_model():
    vision = {"image_key", "images_per_prompt", "image_max_pixels", "freeze_vision_tower"}
    assert not vision & set(asked(advanced=True))
    assert not vision & set(asked(advanced=True, dataset="geo3k"))  # a text model: refused by VI572, not asked
    fields = asked(model=VL, dataset="geo3k")
    assert {"images_per_prompt", "image_max_pixels"} <= set(fields) and not {"image_key", "freeze_vision_tower"} & set(fields)
    assert fields.index("dataset") < fields.index("images_per_prompt") < fields.index("image_max_pixels")
    assert "freeze_vision_tower" in asked(model=VL, dataset="geo3k", advanced=True)
    assert not {"images_per_prompt", "image_max_pixels"} & set(asked(model=VL, dataset="gsm8k"))  # no images


def test_image_key_is_asked_for_a_local_image_file(tmp_path):
    (tmp_path / "rows.parquet").write_bytes(b"PAR1")
    ctx = Context(answers={"model": VL, "dataset": "rows.parquet"}, base_dir=str(tmp_path))
    assert "image_key" in [q.field for q in applicable(ctx)]


def test_image_pixels_offered_fit_max_prompt_length():
    """max_prompt_length=512 holds 448 image tokens: the offered budgets are those, the default the largest of them."""
    ctx = Context(answers={"model": VL, "dataset": "geo3k", "images_per_prompt": 1}, base_dir="/r",
                  asked={"model", "dataset", "images_per_prompt"})
    q = BY_FIELD["image_max_pixels"]
    values = [v for v, _ in offered(q, ctx)]
    assert values and all(v // 28 ** 2 <= 512 - 64 for v in values), values
    assert default_for(q, ctx) == max(values) == 256 * 28 ** 2
    refused = refusal(q, 1003520, ctx)
    assert refused and "[VI570]" in refused and "max_prompt_length=1536" in refused
    bigger = Context(answers={**ctx.answers, "max_prompt_length": 2048}, base_dir="/r", asked=set(ctx.asked))
    assert default_for(q, bigger) == 1003520  # the field's default fits a longer prompt
