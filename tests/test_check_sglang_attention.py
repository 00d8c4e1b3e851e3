"""VI660: SGLang rollout of a Gated DeltaNet hybrid on a Blackwell GPU with an attention backend SGLang refuses there
(held-out case R84-04, sgl-project/sglang#35080: verl's delta-sync example on B300).

Oracle for verl's side: the fallback backends verl 0.9.1 picks when engine_kwargs.sglang.attention_backend is unset,
read back from the installed launch_server (workers/rollout/sglang_rollout/async_sglang_server.py) with ast and
compared with the rule's VERL_DEFAULTS. SGLang's accepted set is not in verl; the rule cites SGLang's assertion.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.sglang_attention import BLACKWELL_GDN, CUDA_DEFAULTS, KEY, VERL_DEFAULTS, refused_backends

R = "actor_rollout_ref.rollout"
GDN = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # catalogue shape with 36 linear-attention layers


def _verl_fallbacks() -> set[str]:
    spec = importlib.util.find_spec("verl")
    path = Path(list(spec.submodule_search_locations)[0]) / "workers/rollout/sglang_rollout/async_sglang_server.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    [fn] = [n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef) and n.name == "launch_server"]
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "attention_backend is None":
            for sub in ast.walk(node):
                if (isinstance(sub, ast.Assign) and [ast.unparse(t) for t in sub.targets] == ["attention_backend"]
                        and isinstance(sub.value, ast.Constant)):
                    out.add(sub.value.value)
    return out


@pytest.mark.verl
def test_verl_defaults_are_verls():
    assert _verl_fallbacks() == set(VERL_DEFAULTS)
    assert set(CUDA_DEFAULTS) == set(VERL_DEFAULTS) - {"aiter"}  # aiter only under torch.version.hip


def test_refused_backends():
    assert refused_backends(None) == CUDA_DEFAULTS
    assert refused_backends("flashinfer") == ("flashinfer",)
    assert all(not refused_backends(b) for b in BLACKWELL_GDN)


def _hits(*overrides: str, gpu_type: str = "B300") -> list:
    report = check(None, list(overrides), gpu_type=gpu_type)
    return [f.problem for f in report.findings if f.problem.rule == "VI660"]


@pytest.mark.verl
def test_vi660_fires():
    [hit] = _hits(f"actor_rollout_ref.model.path={GDN}", f"{R}.name=sglang")
    assert hit.severity == "warning" and KEY in hit.keys and "triton" in hit.hint
    assert _hits(f"actor_rollout_ref.model.path={GDN}", f"{R}.name=sglang", f"+{KEY}=flashinfer", gpu_type="B200")


@pytest.mark.verl
def test_vi660_controls():
    assert not _hits(f"actor_rollout_ref.model.path={GDN}", f"{R}.name=sglang", f"+{KEY}=triton")
    assert not _hits(f"actor_rollout_ref.model.path={GDN}", f"{R}.name=sglang", gpu_type="H100")
    assert not _hits(f"actor_rollout_ref.model.path={GDN}", f"{R}.name=vllm")
    assert not _hits("actor_rollout_ref.model.path=Qwen/Qwen3-8B", f"{R}.name=sglang")
