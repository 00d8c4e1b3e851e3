"""Plan-time facts about the run's data files and checkpoints (the planner's `_data` stage calls these).

- paths(): every local data file (dataset, train_files, val_files) exists where it must (VI539), and a path the
  user wrote relative is stored relative to the bundle, or refused when it cannot travel with it (VI540).
- pods(): KubeRay without shared_pvc: data and checkpoints must be somewhere the pods see (VI756, VI757).
- overlong_prompts(): with a local tokenizer, verl's overlong filter must leave one batch (VI541, VI542).

`b` is the planner's working state (wizard.planner.state.Build); this module does not import the
pipeline (the import graph has no cycle), so it is typed loosely here.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any, Callable, Optional

from wizard._parquet import saved_dataset
from wizard.intent.answers import BUILTIN_DATASETS, local_dataset
from wizard.planner import dataprep

DATA_KEYS = ("dataset", "train_files", "val_files")
PREPARED = (dataprep.PREPARED_TRAIN, dataprep.PREPARED_VAL)


def written_relative(value: str) -> bool:
    """A path the user wrote relative (to the current folder, or to the answers file that holds it)."""
    return not value.startswith(("/", "~")) and "${" not in value and "://" not in value


def bundle_relative(path: str, bundle: str) -> Optional[str]:
    """`path` (absolute) relative to the bundle folder (absolute), or None when they share no folder but the
    root: such a relative path is an absolute one in disguise and breaks wherever the bundle is copied."""
    path, bundle = posixpath.normpath(path), posixpath.normpath(bundle)
    if posixpath.commonpath([path, bundle]) == "/":
        return None
    return posixpath.relpath(path, bundle)


def _is_local(key: str, value: Optional[str]) -> bool:
    if not value:
        return False
    if key == "dataset":
        return local_dataset(value)
    return "://" not in value and ("${" not in value or value.startswith("${oc.env:HOME}/"))


def _here(value: str) -> str:
    return os.path.expanduser(value.replace("${oc.env:HOME}", "~", 1))


def _where_read(a: Any) -> str:
    return {"ray": "every node of the Ray cluster", "slurm": "every node of the Slurm allocation",
            "kuberay": "the pods (in the image or a mounted volume)"}.get(a.cluster, "this machine")


def paths(b: Any) -> None:
    a, f, written = b.a, b.f, b.written
    own_both = bool(a.train_files and a.val_files)
    for key in DATA_KEYS:
        value = getattr(a, key)
        if not _is_local(key, value):
            continue  # a hub dataset or URL
        as_written = getattr(written, key) if written is not None else value
        relative = written_relative(as_written)
        here = _here(value)
        # (a dataset file nothing reads, as train_files and val_files are yours, need not exist)
        if not os.path.isfile(here) and not (key == "dataset" and (own_both or saved_dataset(here))):
            what = "is a folder, not a data file" if os.path.isdir(here) else "does not exist"
            shown = f"{as_written} ({here})" if as_written != here else here
            if key == "dataset" or relative or a.cluster == "local":
                reader = "data/prepare_data.py reads it on this machine" if key == "dataset" else \
                    "verl reads it" + (" here" if a.cluster == "local" else " from the bundle")
                fix = (f"check the path (relative paths start from {b.base})" if relative else "check the path") + (
                    ", or use dataset=gsm8k or math" if key == "dataset" else ", or leave it unset to use the files "
                    "data/prepare_data.py writes from dataset")
                f.error("VI539", (key,), f"local data file {shown} {what} ({reader})", fix)
            else:
                f.warning("VI539", (key,), f"{value} is not on this machine; verl reads it on {_where_read(a)}",
                          "make sure it exists at this path there")
            continue
        if b.bundle is None or not relative:
            continue
        rel = bundle_relative(os.path.abspath(here), b.bundle)
        if rel is None:
            f.error("VI540", (key,), f"{key}={as_written} is relative, but the file ({here}) and the bundle "
                    f"({b.bundle}) share no folder but /: a relative path from the bundle would not survive copying",
                    f"give the absolute path {key}={here} (it must then exist there wherever the bundle runs), or "
                    "write the bundle in a folder beside the data")
            continue
        b.stored[key] = rel
        if key != "dataset" and rel.startswith("../"):
            _outside_bundle(b, key, as_written, rel)


def _outside_bundle(b: Any, key: str, as_written: str, rel: str) -> None:
    """A file of yours that verl reads directly, outside the bundle, where only the bundle travels."""
    a = b.a
    carrier = {"ray": "ray/submit.sh uploads only the bundle folder (the job's working_dir)",
               "kuberay": f"the pods see only the bundle's files on PVC {a.shared_pvc}" if a.shared_pvc else "",
               "slurm": "the Slurm job's container mounts only the bundle folder" if a.image else ""}.get(a.cluster, "")
    if carrier:
        b.f.error("VI540", (key, "cluster"), f"{key}={as_written} is outside the bundle ({rel}), and {carrier}",
                  f"move it into the bundle (e.g. data/) and set {key} to it, or give an absolute path that "
                  f"exists on {_where_read(a)}")


def pods(b: Any) -> None:
    """KubeRay without shared_pvc: the pods' working folder is a pod-local emptyDir (k8s artefacts)."""
    a, f = b.a, b.f
    if a.checkpoint_pvc and a.cluster != "kuberay":
        f.warning("VI758", ("checkpoint_pvc", "cluster"), f"checkpoint_pvc is for cluster=kuberay, not {a.cluster}",
                  "remove checkpoint_pvc")
    if a.cluster != "kuberay" or a.shared_pvc:
        return
    fix = ("set shared_pvc=<a ReadWriteMany PVC> and copy the data onto it, use dataset=gsm8k or math (the pods "
           "prepare those themselves), or set train_files and val_files to absolute paths inside the image")
    train, val = b.train_files[0], b.val_files[0]
    reads = [p for p in dict.fromkeys((train, val)) if p in PREPARED]
    if reads and not dataprep.hub_prepared_in_place(a, b.base, train, val):
        source = (f"dataset={b.written.dataset if b.written is not None else a.dataset} is a file on this machine"
                  if a.dataset not in BUILTIN_DATASETS else f"{dataprep.PREPARED_VAL if train not in PREPARED else dataprep.PREPARED_TRAIN} "
                  "is prepared in the pods only when both data files are the bundle's")
        f.error("VI756", ("dataset", "shared_pvc", "cluster"),
                f"{source}: the KubeRay pods read {' and '.join(reads)} from their working folder, a pod-local "
                "emptyDir that data/prepare_data.py on this machine never reaches", fix)
    for key in ("train_files", "val_files"):
        value = getattr(a, key)
        if _is_local(key, value) and b.written is not None and written_relative(getattr(b.written, key)):
            f.error("VI756", (key, "shared_pvc", "cluster"),
                    f"{key}={getattr(b.written, key)} is a file on this machine: the KubeRay pods cannot read it "
                    "(their working folder is a pod-local emptyDir)", fix)
    if a.save_freq > 0 and not a.checkpoint_pvc:
        f.error("VI757", ("save_freq", "checkpoint_pvc", "shared_pvc"),
                f"save_freq={a.save_freq} writes checkpoints into the pods' working folder, a pod-local emptyDir: "
                "they are lost when the pods go (the RayJob deletes its cluster after the job)",
                "set checkpoint_pvc=<a ReadWriteMany PVC> (mounted at the checkpoint folder in every pod) or "
                "shared_pvc=<PVC>, or save_freq=-1 to keep no checkpoints")


def overlong_prompts(b: Any, batch_ok: Callable[[int], bool]) -> None:
    """verl drops prompts longer than max_prompt_length at start-up (wizard.planner.overlong): count them with the
    model's local tokenizer; refuse where fewer than one batch of training rows (or no validation row) is left.
    PLAN.md's Data section says what was counted (facts["overlong"])."""
    from wizard.planner import overlong

    a, P, M = b.a, b.prompts, b.a.max_prompt_length
    if not P:
        return
    check = f"`verl-init validate-dataset <file> --tokenizer <model folder> --max-prompt-length {M}`"
    if a.train_files:
        key, path, prep, frac = "train_files", _here(a.train_files), None, 0.0
        if not _is_local(key, a.train_files):
            b.facts["overlong"] = f"Prompts longer than {M} tokens: not counted (train_files is not a local file)."
            return
    elif a.dataset not in BUILTIN_DATASETS:
        key, path, prep, frac = "dataset", _here(a.dataset), dataprep.resolve(a, b.base), a.val_fraction
    else:
        b.facts["overlong"] = (f"Prompts longer than {M} tokens: not counted ({a.dataset} is downloaded when "
                               f"data/prepare_data.py runs); after it ran, count them with {check}.")
        return
    if not os.path.isfile(path) and not saved_dataset(path):
        return
    folder = overlong.local_tokenizer(a.model)
    tok, why = (None, f"the model {a.model} is not a local folder with a tokenizer") if folder is None \
        else overlong.load_tokenizer(folder)
    if tok is None:
        b.facts["overlong"] = (f"Prompts longer than {M} tokens: unchecked ({why}); verl drops them at start-up "
                               f"(data.filter_overlong_prompts). Count them with {check}.")
        return
    from wizard._io import count_file_rows

    total = count_file_rows(path, 1 << 40) if prep is not None and frac > 0 else None
    c = overlong.count(path, tok, M, P, prep=prep, val_fraction=frac, seed=a.split_seed, total_rows=total)
    if not c.complete:
        b.facts["overlong"] = (f"Prompts longer than {M} tokens: counted with {a.model}'s tokenizer, " + (
            f"at least {P} training prompts fit (the count stopped there)." if c.enough else
            f"not completely ({c.note}); count them with {check}."))
        return
    dropped = c.train - c.train_kept
    b.facts["overlong"] = (f"Prompts longer than {M} tokens: {dropped} of {c.train} training prompts (counted with "
                           f"{a.model}'s tokenizer and chat template); verl drops them at start-up and trains on "
                           f"{c.train_kept}." + (f" Validation: {c.val_kept} of {c.val} kept." if c.val else ""))
    shown = getattr(b.written, key, None) or getattr(a, key)
    if c.train_kept < P:
        smaller = [p for p in range(min(c.train_kept, P), 0, -1) if batch_ok(p)][:1]
        options = ([f"max_prompt_length={c.kth_length} keeps {P}"] if c.kth_length else []) + (
            [f"prompts_per_step={smaller[0]}"] if smaller else []) + ["shorter prompts"]
        b.f.error("VI541", ("max_prompt_length", "prompts_per_step", key),
                  f"{key}={shown}: verl's overlong filter keeps {c.train_kept} of {c.train} training prompts "
                  f"(≤ max_prompt_length={M} tokens), fewer than prompts_per_step={P}: verl trains 0 steps",
                  "use " + ", or ".join(options))
    elif dropped:
        b.f.warning("VI542", ("max_prompt_length", key),
                    f"verl drops {dropped} of {c.train} training prompts of {shown} longer than max_prompt_length={M} "
                    f"tokens at start-up ({c.train_kept} remain)",
                    f"raise max_prompt_length to keep them, or list them with {check}")
    if c.val and not c.val_kept:
        b.f.error("VI541", ("max_prompt_length", "val_fraction"),
                  f"every validation prompt held out of {shown} is longer than max_prompt_length={M} tokens: verl "
                  "stops on an empty validation set", "raise max_prompt_length, or shorten those prompts")
    if a.val_files and a.val_files != a.train_files and _is_local("val_files", a.val_files) \
            and os.path.isfile(_here(a.val_files)):
        v = overlong.count(_here(a.val_files), tok, M, 1)
        if v.complete and v.rows and not v.train_kept:  # a file read as it is: all its rows are "train" rows here
            b.f.error("VI541", ("max_prompt_length", "val_files"),
                      f"val_files={getattr(b.written, 'val_files', None) or a.val_files}: every prompt is longer than "
                      f"max_prompt_length={M} tokens: verl stops on an empty validation set",
                      "raise max_prompt_length, or shorten those prompts")
