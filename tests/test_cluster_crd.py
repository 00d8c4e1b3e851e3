"""KubeRay manifests against the KubeRay CRDs, strictly, and the rules the CRD schema cannot express.

`strict_schema` turns a CRD's openAPIV3Schema into a JSON Schema the `jsonschema` package enforces
the way the API server would, plus typo-catching (see tests/data/reference/kuberay/SOURCE.md):
`nullable: true` becomes a null type, `required` entries that declare a `default` are dropped (the
API server fills defaults before it validates), and `additionalProperties: false` is added wherever
`properties` are listed. Every upstream sample passes it; the rendered manifests must too.

Other test files import `validate_manifest` and `cluster_files` from here.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REFERENCE

import jsonschema

KUBERAY = REFERENCE / "kuberay"  # copied from KubeRay with its source: kuberay/SOURCE.md
CRD_FILES = {"RayJob": "ray.io_rayjobs.yaml", "RayCluster": "ray.io_rayclusters.yaml"}

_COMBINATORS = ("anyOf", "allOf", "oneOf")


def strict_schema(node: Any) -> Any:
    """The strict variant of one OpenAPI v3 schema node (recursively; the input is not changed)."""
    if not isinstance(node, dict):
        return node
    out = dict(node)
    if out.pop("nullable", False):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list):
            out["type"] = [*kind, "null"]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
            return strict_schema_children(out)
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return strict_schema_children(out)


def strict_schema_children(out: dict[str, Any]) -> dict[str, Any]:
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: strict_schema(v) for k, v in props.items()}
        if "required" in out:
            out["required"] = [r for r in out["required"] if "default" not in props.get(r, {})]
            if not out["required"]:
                del out["required"]
        if "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = strict_schema(out["additionalProperties"])
    if isinstance(out.get("items"), dict):
        out["items"] = strict_schema(out["items"])
    for key in _COMBINATORS:
        if isinstance(out.get(key), list):
            out[key] = [strict_schema(s) for s in out[key]]
    if isinstance(out.get("not"), dict):
        out["not"] = strict_schema(out["not"])
    return out


@functools.cache
def _crd(kind: str) -> tuple[str, dict[str, Any]]:
    """(apiVersion, strict schema) of the storage version of a KubeRay CRD."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load((KUBERAY / CRD_FILES[kind]).read_text(encoding="utf-8"), Loader=loader)
    assert doc["spec"]["names"]["kind"] == kind
    version = next(v for v in doc["spec"]["versions"] if v.get("storage"))
    return f"{doc['spec']['group']}/{version['name']}", strict_schema(version["schema"]["openAPIV3Schema"])


def validate_manifest(doc: dict[str, Any]) -> list[str]:
    """Schema errors of a RayJob / RayCluster document, as readable strings (empty: valid)."""
    api_version, schema = _crd(doc.get("kind", ""))
    errors = []
    if doc.get("apiVersion") != api_version:
        errors.append(f"apiVersion {doc.get('apiVersion')!r} is not {api_version!r}")
    validator = jsonschema.Draft7Validator(schema)
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        errors.append(f"{'/'.join(map(str, err.absolute_path)) or '<root>'}: {err.message}")
    return errors


def cluster_files(profile: str, base_dir: str = "/work/runs", **answers: Any) -> dict[str, str]:
    """Render a shipped profile with some answers changed."""
    import wizard
    from wizard.intent.answers import make_answers
    from wizard.intent.profiles import profile_answers

    data = {**profile_answers(profile), **answers}
    return wizard.render(wizard.plan(make_answers(data), base_dir=base_dir))


def _samples() -> list[Path]:
    return sorted((KUBERAY / "samples").glob("*.yaml"))


# --- the validator itself ----------------------------------------------------------------------


def test_strict_schema_rules():
    schema = {
        "type": "object",
        "required": ["a", "b"],
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {"type": "string", "nullable": True},
            "c": {"type": "object", "additionalProperties": {"type": "string"}},
            "d": {"type": "string", "enum": ["x"], "nullable": True},
        },
    }
    strict = strict_schema(schema)
    assert strict["required"] == ["b"]  # a has a default
    assert strict["additionalProperties"] is False
    assert strict["properties"]["b"]["type"] == ["string", "null"]
    assert strict["properties"]["d"]["enum"] == ["x", None]
    assert "additionalProperties" in strict["properties"]["c"]  # a map keeps its value schema
    v = jsonschema.Draft7Validator(strict)
    assert v.is_valid({"b": None}) and v.is_valid({"b": "s", "d": None})
    assert not v.is_valid({"b": "s", "typo": 1})
    assert schema["required"] == ["a", "b"]  # input untouched


@pytest.mark.parametrize("sample", _samples(), ids=lambda p: p.name)
def test_upstream_samples_pass_the_strict_validator(sample):
    docs = [d for d in yaml.safe_load_all(sample.read_text(encoding="utf-8")) if d]
    checked = [d for d in docs if d.get("kind") in CRD_FILES]
    assert checked, f"{sample.name} holds no RayJob/RayCluster"
    for doc in checked:
        assert validate_manifest(doc) == [], sample.name


def test_every_sample_file_is_covered():
    assert len(_samples()) >= 20


@pytest.mark.parametrize("mutate, expect", [
    (lambda d: d["spec"].__setitem__("shutdownAfterJobFinish", True), "shutdownAfterJobFinish"),
    (lambda d: d["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].__setitem__("replica", 2), "replica"),
    (lambda d: d["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
     .__setitem__("imagePullPolicyy", "Always"), "imagePullPolicyy"),
    (lambda d: d["spec"].__setitem__("ttlSecondsAfterFinished", "600"), "is not of type 'integer'"),
    (lambda d: d["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
     ["resources"]["limits"].__setitem__("nvidia.com/gpu", "four"), "does not match"),
    (lambda d: d["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].pop("groupName"), "'groupName' is a required"),
])
def test_strict_validator_rejects_typos_and_bad_values(mutate, expect):
    doc = yaml.safe_load(cluster_files("cluster-8gpu")["k8s/rayjob.yaml"])
    assert validate_manifest(doc) == []
    bad = copy.deepcopy(doc)
    mutate(bad)
    errors = validate_manifest(bad)
    assert errors and any(expect in e for e in errors), errors


# --- the rendered manifests ----------------------------------------------------------------------

VARIANTS = [
    {},
    {"nnodes": 1, "gpus_per_node": 1, "model": "Qwen/Qwen2.5-0.5B-Instruct", "prompts_per_step": 32},
    {"nnodes": 4, "gpus_per_node": 8, "logger": ["console", "wandb"], "k8s_namespace": "rl-team",
     "shared_pvc": "verl-shared", "shm_size_gb": 64, "image": "registry.example.com/verl:0.9.1",
     "job_name": "a" * 47, "cpus_per_node": 100, "memory_per_node_gb": 900, "head_cpus": 16, "head_memory_gb": 128},
    {"nnodes": 3, "gpus_per_node": 2, "prompts_per_step": 96},
]


@pytest.mark.parametrize("answers", VARIANTS, ids=lambda a: ",".join(a) or "profile")
def test_rendered_manifests_validate_strictly_and_keep_the_rules(answers):
    from wizard.env.cluster import manifest_problems

    files = cluster_files("cluster-8gpu", **answers)
    nnodes = answers.get("nnodes", 2)
    gpn = answers.get("gpus_per_node", 4)
    for name in ("k8s/rayjob.yaml", "k8s/raycluster.yaml"):
        docs = [d for d in yaml.safe_load_all(files[name]) if d]
        assert len(docs) == 1
        assert validate_manifest(docs[0]) == [], name
        assert manifest_problems(docs[0], nnodes, gpn, source=name) == [], name
    cm = yaml.safe_load(files["k8s/configmap.yaml"])
    assert cm["kind"] == "ConfigMap" and cm["apiVersion"] == "v1"


# --- rules the schema cannot express: one test per rule ---------------------------------------------


def _rayjob() -> dict[str, Any]:
    return yaml.safe_load(cluster_files("cluster-8gpu")["k8s/rayjob.yaml"])


def _worker(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]


def _container(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]["containers"][0]


def _rules(doc: dict[str, Any], nnodes: int = 2, gpn: int = 4) -> set[str]:
    from wizard.env.cluster import manifest_problems

    return {p.rule for p in manifest_problems(doc, nnodes, gpn)}


def test_rendered_rayjob_keeps_every_rule():
    assert _rules(_rayjob()) == set()


def test_vi730_rayjob_name_at_most_47_dns1035():
    doc = _rayjob()
    doc["metadata"]["name"] = "a" * 48
    assert "VI730" in _rules(doc)
    doc["metadata"]["name"] = "Upper-Case"
    assert "VI730" in _rules(doc)


def test_vi731_gpu_total_must_equal_the_plan():
    doc = _rayjob()
    _worker(doc)["replicas"] = _worker(doc)["minReplicas"] = _worker(doc)["maxReplicas"] = 3
    assert "VI731" in _rules(doc)
    assert "VI731" not in _rules(doc, nnodes=3)


def test_vi731_gpu_requests_equal_limits():
    doc = _rayjob()
    _container(_worker(doc))["resources"]["requests"]["nvidia.com/gpu"] = "2"
    assert "VI731" in _rules(doc)


def test_vi731_fixed_replicas():
    doc = _rayjob()
    _worker(doc)["maxReplicas"] = 5
    assert "VI731" in _rules(doc)


def test_vi732_cpus_per_gpu():
    doc = _rayjob()
    for side in ("requests", "limits"):
        _container(_worker(doc))["resources"][side]["cpu"] = "12"  # 4 GPUs need 3 × 4 + 1 = 13
    assert "VI732" in _rules(doc)


def test_vi733_secrets_only_through_secret_refs():
    doc = _rayjob()
    _container(_worker(doc))["env"].append({"name": "WANDB_API_KEY", "value": "abc"})
    assert "VI733" in _rules(doc)


def test_vi734_no_cuda_visible_devices():
    doc = _rayjob()
    _container(_worker(doc))["env"].append({"name": "CUDA_VISIBLE_DEVICES", "value": "0,1"})
    assert "VI734" in _rules(doc)


def test_vi735_gpu_less_head():
    doc = _rayjob()
    head = doc["spec"]["rayClusterSpec"]["headGroupSpec"]
    head["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert "VI735" in _rules(doc)


def test_vi736_rayjob_shuts_its_cluster_down():
    doc = _rayjob()
    del doc["spec"]["ttlSecondsAfterFinished"]
    assert "VI736" in _rules(doc)
