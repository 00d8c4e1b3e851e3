"""Issue 27 item 8, the KubeRay image: an exact tag (never a floating `.latest`), the one verl's own v0.9.0
Dockerfiles build, whose stack is the one verl 0.9.1 pins (checked against the installed verl's metadata); PLAN.md
says which image, that no published tag holds verl 0.9.1 itself (unconfirmed) and how to pin one by digest; an
image answer (a digest) is used as given."""

from __future__ import annotations

import re
from importlib.metadata import requires, version

import wizard
from wizard.intent.answers import make_answers
from wizard.renderer.images import DEFAULT_IMAGES

KUBERAY = dict(nnodes=2, gpus_per_node=4, gpu_memory_gb=80, gpu_type="A100", cluster="kuberay",
               model="Qwen/Qwen2.5-7B-Instruct", prompts_per_step=128, samples_per_prompt=8, checkpoint_pvc="ckpt")


def _pinned(extra: str, package: str) -> str:
    """The version verl pins for `package` in its `extra` (verl's own METADATA: Requires-Dist ...; extra == ...)."""
    for req in requires("verl") or []:
        m = re.match(rf"{package}==([\d.]+)\s*;\s*extra == \"{extra}\"", req)
        if m:
            return m.group(1)
    raise AssertionError(f"verl {version('verl')} pins no {package} for extra {extra}")


def test_default_tags_are_exact_and_match_verls_own_pins():
    vllm, sglang = _pinned("vllm", "vllm").split("."), _pinned("sglang", "sglang").split(".")
    # verl's tag scheme: vllm0.24.0 -> vllm024, sglang 0.5.12 -> sgl0512 (docker/Dockerfile.stable.*, line 2)
    assert DEFAULT_IMAGES["vllm"].startswith(f"verlai/verl:vllm{vllm[0]}{vllm[1]}.")
    assert DEFAULT_IMAGES["sglang"].startswith(f"verlai/verl:sgl{sglang[0]}{sglang[1]}{sglang[2]}.")
    assert not any(image.endswith(".latest") or ":" not in image for image in DEFAULT_IMAGES.values())


def test_plan_md_says_which_image_and_how_to_pin(tmp_path):
    plan = wizard.plan(make_answers(KUBERAY), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    rayjob = (bundle / "k8s" / "rayjob.yaml").read_text()
    assert f"image: {DEFAULT_IMAGES['vllm']}" in rayjob and ".latest" not in rayjob
    plan_md = " ".join((bundle / "PLAN.md").read_text().split())
    assert f"Image of every pod: {DEFAULT_IMAGES['vllm']}" in plan_md
    assert "UNCONFIRMED for verl 0.9.1" in plan_md and "not verl itself" in plan_md
    assert "pip install --no-deps verl==0.9.1" in plan_md and "image=REGISTRY/NAME@sha256:DIGEST" in plan_md
    assert "https://github.com/verl-project/verl/blob/v0.9.0/docker/Dockerfile.stable.vllm" in plan_md


def test_an_image_answer_by_digest_is_used_as_given(tmp_path):
    digest = "registry.example.com/verl@sha256:" + "ab" * 32
    plan = wizard.plan(make_answers({**KUBERAY, "image": digest}), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    assert f"image: {digest}" in (bundle / "k8s" / "rayjob.yaml").read_text()
    plan_md = (bundle / "PLAN.md").read_text()
    assert f"Image of every pod: {digest} (image (your answer))" in plan_md and "UNCONFIRMED" not in plan_md


def _submit_runtime_env(bundle) -> str:
    line = next(x for x in (bundle / "k8s" / "submit.sh").read_text().splitlines() if x.startswith("RUNTIME_ENV_JSON="))
    import shlex

    return shlex.split(line.split("=", 1)[1], comments=True)[0] if "=''" not in line else ""


def test_the_default_image_gets_verl_from_the_jobs_runtime_env(tmp_path):
    """The default image holds verl's dependencies but not verl: without more, `python3 -m verl.trainer.main_ppo`
    fails in every pod. The RayJob (runtimeEnvYAML) and k8s/submit.sh (--runtime-env-json) install the installed
    verl's version with --no-deps; real Ray validates the runtime env, and Ray's pip runtime env inherits the
    image's packages (--system-site-packages in the installed Ray), so --no-deps keeps the image's pinned stack."""
    import inspect
    import json

    import yaml
    from ray._private.runtime_env import virtualenv_utils
    from ray.runtime_env import RuntimeEnv

    assert "--system-site-packages" in inspect.getsource(virtualenv_utils)
    plan = wizard.plan(make_answers(KUBERAY), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    spec = yaml.safe_load((bundle / "k8s" / "rayjob.yaml").read_text())["spec"]
    env = yaml.safe_load(spec["runtimeEnvYAML"])
    RuntimeEnv(**env)  # raises on a runtime env Ray would refuse
    assert env["pip"]["packages"] == [f"verl=={version('verl')}"] and "--no-deps" in env["pip"]["pip_install_options"]
    assert json.loads(_submit_runtime_env(bundle)) == env
    assert "--runtime-env-json" in (bundle / "k8s" / "submit.sh").read_text()
    assert "installs verl==0.9.1 over it when the job starts" in " ".join((bundle / "PLAN.md").read_text().split())


def test_an_image_of_your_own_gets_no_runtime_env(tmp_path):
    plan = wizard.plan(make_answers({**KUBERAY, "image": "registry.example.com/verl:0.9.1"}), base_dir=str(tmp_path))
    bundle = wizard.write_bundle(wizard.render(plan), tmp_path / "b")
    import yaml

    assert "runtimeEnvYAML" not in yaml.safe_load((bundle / "k8s" / "rayjob.yaml").read_text())["spec"]
    assert _submit_runtime_env(bundle) == ""
