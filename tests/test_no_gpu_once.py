"""On a machine without NVIDIA GPUs, the wizard says so once: NVML's reason on the GPUs line, the VI740 finding
without repeating it, and no note under the GPU questions (issue 14: it was printed three times). NVML is
faked at the library boundary (the `pynvml` module), as tests/test_probe.py does."""

from __future__ import annotations

from test_interactive import ENTER, drive, no_gpu_probes, typed
from test_probe import install, no_driver

from wizard.env.probe import probe_gpus


def test_the_wizard_says_no_gpu_once(tmp_path, monkeypatch):
    install(monkeypatch, no_driver())
    probes = no_gpu_probes()
    probes.gpus = probe_gpus()  # the real probe over the fake library: NVML's own "library not found"
    assert "NVML Shared Library Not Found" in probes.gpus.reason
    r = drive(tmp_path, monkeypatch, {"gpus": "other" + ENTER, "gpus_per_node": typed("8"),
                                      "gpu_memory_gb": typed("80")}, probes, dry_run=True)
    assert r.rc == 0, r.out
    assert r.out.count("NVML Shared Library Not Found") == 1, r.out
    assert r.out.count("no NVIDIA GPU found") == 1, r.out
    assert "[VI740]" in r.out and "gpus_per_node" in r.asked
