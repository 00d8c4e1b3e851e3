"""The image the KubeRay pods run (issue 27 item 8): the `image` answer, else verl's own image by an exact tag.
Shared by the cluster manifests (wizard.renderer.artefacts.cluster) and PLAN.md (wizard.renderer.render)."""

from __future__ import annotations

from typing import Any, Optional

# verl's own images for the verl 0.9 line, by an exact (non-floating) tag: the build targets named on line 2 of
# https://github.com/verl-project/verl/blob/v0.9.0/docker/Dockerfile.stable.vllm ("# Target: verlai/verl:vllm024.dev2")
# and .../v0.9.0/docker/Dockerfile.stable.sglang ("# Target: verlai/verl:sgl0512.dev4"), the images verl v0.9.0's CI
# runs (.github/workflows/vllm.yml:78, sgl.yml:77). Their stacks match verl 0.9.1's own pins (its METADATA: extra vllm
# -> vllm==0.24.0, torch==2.11.0; extra sglang -> sglang==0.5.12). No tag is published for 0.9.1 (the repository has
# no v0.9.1 tag) and these images hold verl's dependencies but not verl: Dockerfile.stable.vllm:178 runs
# `pip install git+...verl.git@${VERL_VERSION} && pip uninstall -y verl`. PLAN.md says so and how to pin (IMAGE_PIN).
DEFAULT_IMAGES = {"vllm": "verlai/verl:vllm024.dev2", "sglang": "verlai/verl:sgl0512.dev4"}
IMAGE_SOURCE = "https://github.com/verl-project/verl/blob/v0.9.0/docker/Dockerfile.stable.{engine}"


def image_choice(a: Any, verl_version: str) -> tuple[str, str]:
    """(image, why): the answer as given, else DEFAULT_IMAGES, saying plainly that no tag holding verl
    `verl_version` is confirmed and how to pin one."""
    if a.image:
        return a.image, "image (your answer)"
    image = DEFAULT_IMAGES[a.rollout_engine]
    engine = "vllm" if a.rollout_engine == "vllm" else "sglang"
    return image, (f"verl's own {a.rollout_engine} image for the verl 0.9 line, by the exact tag its "
                   f"{IMAGE_SOURCE.format(engine=engine)} builds; UNCONFIRMED for verl {verl_version}: no tag holding "
                   f"verl {verl_version} is published, and this image holds verl's dependencies (the versions verl "
                   "0.9.1 pins) but not verl itself (its Dockerfile uninstalls verl), so the job's Ray runtime "
                   f"environment installs verl=={verl_version} over it when the job starts (pip --no-deps: the pods "
                   "need PyPI). Pin your own: build an image "
                   f"FROM {image} that runs pip install --no-deps verl=={verl_version}, push it, then re-render with "
                   "image=REGISTRY/NAME@sha256:DIGEST")


def verl_runtime_env(a: Any, verl_version: str) -> Optional[dict[str, Any]]:
    """The Ray runtime environment that puts verl into a default image (which holds verl's dependencies but not
    verl: see DEFAULT_IMAGES); None for the user's own image, which is taken to hold verl. Ray's pip runtime env
    builds a virtualenv with --system-site-packages (ray/_private/runtime_env/virtualenv_utils.py), so --no-deps
    keeps the image's pinned torch/vLLM/SGLang; the job's driver and every worker run in it, and verl's own
    ray.init(runtime_env=...) merges into it (it sets env_vars only: ray/_private/worker.py _merge_runtime_env)."""
    if a.image:
        return None
    return {"pip": {"packages": [f"verl=={verl_version}"],
                    "pip_install_options": ["--no-deps", "--disable-pip-version-check", "--no-cache-dir"]}}
