"""VI958 / VI959: the attention backend an SGLang rollout gets, against the card and the model
(wizard/check/rules/sglang_attention.py).

Real case: sglang#35080 - verl's own one-step-off delta-sync example run with a hybrid GDN model (Qwen3.5) on B300:
verl picked flashinfer itself and sglang 0.5.17 refused it ("Only {'trtllm_mha', 'triton', 'fa4'} backends are
supported on Blackwell GPUs for hybrid GDN models"). Each fault is planted beside valid controls. The oracles are
verl's own code on the CPU: the `if attention_backend is None:` block of its SGLangHttpServer.launch_server, run
from its source with a stub torch and a stub sglang, picks the same backend on every card (it reads only the ROCm flag
and the sglang version), and the table regenerated from verl's source equals the committed one.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers_scripts import regenerated
from packaging import version

from wizard.check.lint import check
from wizard.check.rules import sglang_attention as sa

ROOT = Path(__file__).resolve().parent.parent
M = "actor_rollout_ref.model"
A = "actor_rollout_ref.actor"
KEY = "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend"


def _model(tmp_path: Path, gdn: bool) -> str:
    folder = tmp_path / ("gdn" if gdn else "dense")
    folder.mkdir()
    text = {"model_type": "qwen3_5_text" if gdn else "qwen3", "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "vocab_size": 1000, "max_position_embeddings": 4096}
    if gdn:  # a Qwen3.5-style multimodal wrapper: the GDN layers sit in text_config
        text["layer_types"] = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
        doc = {"model_type": "custom_wrapper", "architectures": ["Wrapper"], "text_config": text}
    else:
        doc = {**text, "architectures": ["Qwen3ForCausalLM"]}
    (folder / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    return str(folder)


def _base(path: str, rollout: str = "sglang") -> list[str]:
    return ["algorithm.adv_estimator=grpo", f"{M}.path={path}", f"actor_rollout_ref.rollout.name={rollout}",
            "data.train_batch_size=64", f"{A}.ppo_mini_batch_size=32", f"{A}.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=4",
            "trainer.nnodes=1", "trainer.n_gpus_per_node=8"]


def _hits(overrides: list[str], gpu_type: str, rule: str = "VI958"):
    return [f.problem for f in check(None, overrides, gpu_type=gpu_type).findings if f.problem.rule == rule]


@pytest.fixture
def no_sglang(monkeypatch):
    monkeypatch.setattr(sa, "installed_sglang", lambda: None)


# --- the oracle: verl's own default-picking code --------------------------------------------------------------------

def _verl_default_block() -> ast.Module:
    src = (sa_verl_root() / "workers/rollout/sglang_rollout/async_sglang_server.py").read_text(encoding="utf-8")
    fn = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)
              and n.name == "launch_server")
    block = next(n for n in ast.walk(fn)
                 if isinstance(n, ast.If) and ast.unparse(n.test) == "attention_backend is None")
    return ast.Module(body=[block], type_ignores=[])


def sa_verl_root() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def _run_verl(hip: str | None, sglang_version: str, device_capability: tuple[int, int]) -> str:
    """verl's block, run as it is, with the card's capability in reach: it never reads it."""
    torch = SimpleNamespace(version=SimpleNamespace(hip=hip),
                            cuda=SimpleNamespace(get_device_capability=lambda: device_capability))
    scope = {"attention_backend": None, "torch": torch, "sglang": SimpleNamespace(__version__=sglang_version),
             "version": version}
    exec(compile(_verl_default_block(), "async_sglang_server.py", "exec"), scope)  # noqa: S102 - verl's own source
    return scope["attention_backend"]


@pytest.mark.parametrize("cap", [(8, 0), (9, 0), (10, 0), (10, 3), (12, 0)])
def test_verl_picks_the_backend_without_looking_at_the_card(cap):
    d = sa.table()["launch_server"]
    assert _run_verl(None, "0.5.17", cap) == d["newer"] == "flashinfer"
    assert _run_verl(None, "0.5.10", cap) == d["older"] == "fa3"
    assert _run_verl("6.4", "0.5.17", cap) == d["rocm"] == "aiter"


def test_the_table_is_verl_s_source():
    assert regenerated("verl_sglang_attention") == (
        ROOT / "wizard" / "check" / "data" / "verl_sglang_attention.json").read_text(encoding="utf-8")
    t = sa.table()
    assert t["gdn_model_types"] == ["qwen3_5", "qwen3_5_moe", "qwen3_next"]
    assert t["gdn_layer_type"] == "linear_attention"
    assert t["launch_server"]["sglang_from"] == "0.5.12"


# --- VI958 ----------------------------------------------------------------------------------------------------------

def test_the_real_case_gdn_model_on_b300_with_verl_s_default_is_an_error(tmp_path):
    (hit,) = _hits(_base(_model(tmp_path, gdn=True)), "B300")
    assert hit.severity == "error" and KEY in hit.keys
    assert "hybrid GDN" in hit.message and "fa3 is refused" in hit.message and "flashinfer" in hit.message
    assert f"+{KEY}=triton" in hit.hint


@pytest.mark.parametrize("gpu", ["B200", "GB200", "RTX 5090"])
def test_explicit_fa3_on_blackwell_is_an_error_for_any_model(tmp_path, gpu):
    (hit,) = _hits([*_base(_model(tmp_path, gdn=False)), f"+{KEY}=fa3"], gpu)
    assert "SM>=80 and SM<=90" in hit.message and f"{KEY}=fa3" in hit.message and f"{KEY}=triton" in hit.hint


def test_explicit_flashinfer_for_a_gdn_model_on_b200_is_an_error(tmp_path):
    (hit,) = _hits([*_base(_model(tmp_path, gdn=True)), f"+{KEY}=flashinfer"], "B200")
    assert "Blackwell GPUs for hybrid GDN models" in hit.message


def test_an_installed_old_sglang_makes_the_blackwell_default_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sa, "installed_sglang", lambda: "0.5.10")
    (hit,) = _hits(_base(_model(tmp_path, gdn=False)), "B200")
    assert "0.5.10" in hit.message and "fa3" in hit.message


# --- VI959 ----------------------------------------------------------------------------------------------------------

def test_unset_on_blackwell_for_a_dense_model_is_a_warning_without_sglang_here(tmp_path, no_sglang):
    (hit,) = _hits(_base(_model(tmp_path, gdn=False)), "B200", rule="VI959")
    assert hit.severity == "warning" and "fa3" in hit.message and "no sglang installed here" in hit.message
    assert not _hits(_base(str(tmp_path / "dense")), "B200")  # not also an error: sglang >= 0.5.12 runs it


# --- valid controls -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu,gdn,extra", [
    ("H100", True, []),                               # both of verl's defaults run on SM 9.0
    ("A100", False, []),                              # and on SM 8.0
    ("H100", True, [f"+{KEY}=flashinfer"]),           # the GDN gate is Blackwell's only
    ("B300", True, [f"+{KEY}=triton"]),               # the fix
    ("B200", True, [f"+{KEY}=fa4"]),
    ("MI300X", True, []),                             # ROCm: verl gives aiter
    ("Ascend910B3", True, []),
])
def test_valid_backends_stay_clean(tmp_path, gpu, gdn, extra, no_sglang):
    overrides = [*_base(_model(tmp_path, gdn=gdn)), *extra]
    assert not _hits(overrides, gpu) and not _hits(overrides, gpu, rule="VI959")


def test_a_new_sglang_installed_here_clears_the_dense_blackwell_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(sa, "installed_sglang", lambda: "0.5.17")
    overrides = _base(_model(tmp_path, gdn=False))
    assert not _hits(overrides, "B200") and not _hits(overrides, "B200", rule="VI959")


def test_a_served_sglang_reward_model_is_read_too(tmp_path, no_sglang):
    rm = "reward.reward_model"
    overrides = [*_base(_model(tmp_path, gdn=False), rollout="vllm"), f"{rm}.enable=True",
                 f"{rm}.model_path={_model(tmp_path, gdn=True)}", f"{rm}.rollout.name=sglang"]
    (hit,) = _hits(overrides, "B300")
    assert f"{rm}.rollout.engine_kwargs.sglang.attention_backend" in hit.keys and f"{rm}.model_path" in hit.keys
    assert not _hits([*overrides, f"+{rm}.rollout.engine_kwargs.sglang.attention_backend=triton"], "B300")
    assert not _hits([o for o in overrides if not o.startswith(f"{rm}.enable")], "B300")  # no reward model served


def test_a_vllm_rollout_is_not_read(tmp_path, no_sglang):
    overrides = _base(_model(tmp_path, gdn=True), rollout="vllm")
    assert not _hits(overrides, "B300") and not _hits(overrides, "B300", rule="VI959")
