"""The only writer: a rendered bundle goes to disk atomically, or not at all."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Mapping

from wizard.intent.errors import UserError
from wizard.renderer.render import EXECUTABLE


def _check_names(files: Mapping[str, str]) -> None:
    for name in files:
        p = PurePosixPath(name)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise UserError(f"refusing to write outside the bundle ({name!r})", "report this as a bug", rule="VI901")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bundle(files: Mapping[str, str], out: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write `files` into folder `out`.

    Everything is written to a temporary folder beside `out` first and then moved into place, so
    an error or Ctrl-C leaves either the old state or the complete bundle. An existing non-empty
    folder is refused unless `force`; with `force` it is replaced as a whole.
    """
    _check_names(files)
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise UserError(f"output path exists and is not a folder ({target})", "choose another --out", rule="VI902", keys=("out",))
    if target.is_dir() and any(target.iterdir()) and not force:
        raise UserError(
            f"output folder is not empty ({target})", "choose another --out, or pass --force to replace it",
            rule="VI903", keys=("out",),
        )
    resolved = target.resolve()
    if target.is_dir() and force and (resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents):
        raise UserError(f"--force would replace the folder this command runs in ({target})",
                        "run verl-init from outside it, or choose another --out", rule="VI903", keys=("out",))
    parent = resolved.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; the bundle gets the mode any new folder would
    old: Path | None = None
    try:
        for name, text in files.items():
            dest = tmp / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            if name in EXECUTABLE or name.endswith(".sh") or name.endswith(".sbatch"):
                dest.chmod(0o755)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=parent))
            os.rename(target, old / "bundle")
        os.rename(tmp, target)
    except BaseException:
        if old is not None and not target.exists():
            os.rename(old / "bundle", target)
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target
