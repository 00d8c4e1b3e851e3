"""Shipped profiles: short YAML files of answers with a one-line description."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wizard.intent.errors import Problem, UserError, WizardError, did_you_mean
from wizard.resources import data_dir

# Keys an answers file may carry besides `answers:` (written by verl-init into verl-init.yaml).
META_KEYS = frozenset({"description", "verl_init_version", "verl_version", "profile", "answers"})


def _read_yaml(path: Path) -> Any:
    import yaml

    from wizard.intent.text import one_line

    from wizard._io import UnsafeInput, read_user_file, safe_yaml

    where = one_line(str(path))
    try:
        # bounded: a regular file of at most 16 MiB, aliases expanding to at most a million values, no key twice
        return safe_yaml(read_user_file(str(path)).decode("utf-8"))
    except UnsafeInput as exc:
        raise UserError(f"{one_line(str(exc))} ({where})", "answers are flat key: value lines in a regular file",
                        rule="VI105", keys=("answers",)) from None
    except FileNotFoundError:
        raise UserError(f"file not found ({where})", "check the path", rule="VI105", keys=("answers",)) from None
    except IsADirectoryError:
        raise UserError(f"is a folder, not a file ({where})", "give the answers YAML file, e.g. BUNDLE/verl-init.yaml",
                        rule="VI105", keys=("answers",)) from None
    except OSError as exc:
        raise UserError(f"cannot read {where}: {exc.strerror or exc}", "check the path and its permissions",
                        rule="VI105", keys=("answers",)) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start}) ({where})",
                        "save the file as UTF-8", rule="VI105", keys=("answers",)) from None
    except RecursionError:
        raise UserError(f"YAML nested too deeply ({where})", "answers are flat key: value lines",
                        rule="VI105", keys=("answers",)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UserError(
            f"not valid YAML{line} ({where})", "fix the YAML syntax", rule="VI105", keys=("answers",)
        ) from None


def answers_mapping(doc: Any, source: str) -> dict[str, Any]:
    """The answer keys of a profile or answers file: an `answers:` mapping, or a flat mapping."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise WizardError([Problem("VI105", "error", ("answers",), f"{source} is not a YAML mapping", "write key: value lines")])
    if "answers" in doc:
        inner = doc["answers"] or {}
        if not isinstance(inner, dict):
            raise WizardError([Problem("VI105", "error", ("answers",), f"{source}: answers is not a mapping", "write key: value lines under answers:")])
        extra = [k for k in doc if k not in META_KEYS]
        if extra:
            raise WizardError(
                [Problem("VI101", "error", (k,), f"unknown top-level key in {source} ({k!r})", "put answer keys under answers:") for k in extra]
            )
        return dict(inner)
    return {k: v for k, v in doc.items() if k not in META_KEYS}


def profile_names() -> list[str]:
    return sorted(p.stem for p in data_dir("profiles").glob("*.yaml"))


def profile_doc(name: str) -> dict[str, Any]:
    path = data_dir("profiles") / f"{name}.yaml"
    if not path.is_file():
        names = profile_names()
        hint = did_you_mean(name, names) or "available: " + ", ".join(names)
        raise UserError(f"no such profile ({name!r})", hint, rule="VI106", keys=("profile",))
    doc = _read_yaml(path)
    return doc if isinstance(doc, dict) else {}


def list_profiles() -> list[tuple[str, str]]:
    """(name, one-line description) for every shipped profile."""
    return [(n, str(profile_doc(n).get("description", "")).strip()) for n in profile_names()]


def profile_answers(name: str) -> dict[str, Any]:
    return answers_mapping(profile_doc(name), f"profile {name}")


# Data paths in an answers file are relative to the file's folder (a bundle's verl-init.yaml stores them relative
# to the bundle); reading the file rewrites them relative to the current folder, as if typed here.
DATA_PATH_KEYS = ("dataset", "train_files", "val_files")


def _rebased(answers: dict[str, Any], folder: Path) -> dict[str, Any]:
    import os

    from wizard.intent.answers import BUILTIN_DATASETS

    out = dict(answers)
    for key in DATA_PATH_KEYS:
        value = out.get(key)
        if not isinstance(value, str) or not value or value.startswith(("/", "~")) or "${" in value \
                or "://" in value or (key == "dataset" and value in BUILTIN_DATASETS):
            continue
        out[key] = os.path.relpath(os.path.normpath(os.path.join(os.path.abspath(folder), value)))
    return out


def _travelled(answers_path: Any, from_file: dict[str, Any], merged: dict[str, Any]) -> None:
    """A relative dataset path from an answers file that no longer resolves (the file was copied away from its
    data): refused at once with the fix, unless --set gave another dataset."""
    import os

    value = from_file.get("dataset")
    if not answers_path or not isinstance(value, str) or merged.get("dataset") != value or os.path.isabs(value) \
            or value.startswith(("~", "$")) or "://" in value or os.path.exists(value):
        return
    from wizard.intent.answers import BUILTIN_DATASETS, DATA_SUFFIXES
    from wizard.intent.errors import UserError

    if value in BUILTIN_DATASETS or not value.lower().endswith(DATA_SUFFIXES):
        return
    folder = os.path.dirname(os.path.abspath(str(answers_path)))
    raise UserError(f"dataset in {answers_path} is relative to that file's folder ({folder}), and "
                    f"{os.path.abspath(value)} does not exist (an answers file copied away from its data?)",
                    "keep the answers file beside its bundle, or pass --set dataset=<the file's path> "
                    "(an absolute path travels anywhere)", rule="VI539", keys=("dataset",))


def answers_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    return _rebased(answers_mapping(_read_yaml(p), str(p)), p.parent)


def load_profile(name: str) -> "Answers":  # noqa: F821
    """A shipped profile as validated Answers."""
    from wizard.intent.answers import make_answers

    return make_answers(profile_answers(name))


def load_answers(path: str | Path) -> "Answers":  # noqa: F821
    """An answers file (e.g. a bundle's verl-init.yaml) as validated Answers."""
    from wizard.intent.answers import make_answers

    return make_answers(answers_file(path))


def merge_overrides(earlier: Any, later: list[str]) -> Any:
    """`--override` items over the answers' `overrides`: one with the same key replaces the earlier one in place
    (`+key` and `key` are the same key), others are appended. A non-list `earlier` is left for validation."""
    from wizard.verlspec.hydra_overrides import parse_override

    if earlier is None:
        earlier = []
    if not isinstance(earlier, list):
        return earlier

    def key(text: Any) -> Any:
        ov = parse_override(text) if isinstance(text, str) else None
        return ov.key if ov is not None else text

    out = list(earlier)
    for item in later:
        k = key(item)
        same = [i for i, old in enumerate(out) if key(old) == k]
        if same:
            out[same[0]] = item
        else:
            out.append(item)
    return out


def merge_answers(
    profile: str | None = None, answers_path: str | Path | None = None, sets: list[str] | None = None,
    overrides: list[str] | None = None,
) -> "Answers":  # noqa: F821
    """Built-in defaults < profile < answers file < --set, validated once at the end; `overrides` (--override)
    join the answers' `overrides` (wizard.intent.profiles.merge_overrides)."""
    from wizard.intent.answers import make_answers, parse_set
    from wizard.intent.errors import WizardError

    merged: dict[str, Any] = {}
    if profile:
        merged.update(profile_answers(profile))
    from_file: dict[str, Any] = {}
    if answers_path:
        from_file = answers_file(answers_path)
        merged.update(from_file)
    problems = []
    for item in sets or []:  # every bad --set is reported at once, not one per run
        try:
            key, value = parse_set(item)
        except WizardError as exc:
            problems.extend(exc.problems)
            continue
        if value is None:  # --set KEY= / KEY=null / --unset KEY: the answer is removed, its default applies
            merged.pop(key, None)
        else:
            merged[key] = value
    if problems:
        raise WizardError(problems)
    _travelled(answers_path, from_file, merged)
    if overrides:
        merged["overrides"] = merge_overrides(merged.get("overrides"), list(overrides))
    return make_answers(merged)
