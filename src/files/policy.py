"""Where a path may point: allowed roots, symlinks resolved, system and credential paths refused.

The rules are described in :mod:`exai.files`; this module decides, for a path a client
named, whether it may be read, and refuses it with a clear error when it may not.

What it promises about links: symlinks are resolved and the target must be inside
the roots; hard links cannot be resolved (every name of a file is as real as the
others), so a regular file with more than one link is refused wherever it is
(``FORBIDDEN``, reason ``refused: one of N hard links to the same file``).
Resolving a path races with whoever changes the tree; a path that changes under
the check is reported as a ``VALIDATION_ERROR`` with the reason the filesystem gave
(``not found`` when it vanished), never as an internal error.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from exai.errors import ForbiddenError, ValidationError_

PathArg = str | os.PathLike[str]

# Refused whatever the roots say. Their resolved forms are refused too (/etc is
# /private/etc on macOS).
SYSTEM_DIRS = (
    "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lock",
    "/lost+found", "/private/etc", "/private/var/run", "/System", "/Library/Keychains",
)  # fmt: skip

__all__ = ["PathArg", "check_paths", "resolve_path"]
# Credential stores refused wherever they appear, under any user's home.
CREDENTIAL_DIR_NAMES = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store"})
CREDENTIAL_FILE_NAMES = frozenset({".netrc", "_netrc", ".git-credentials", ".pgpass"})
# Credential stores refused under the daemon user's home and /root.
HOME_CREDENTIALS = (
    ".docker", ".config/gcloud", ".config/gh", ".config/hub", ".config/op",
    ".local/share/keyrings", "Library/Keychains", ".npmrc", ".pypirc", ".cargo/credentials",
    ".cargo/credentials.toml", ".gem/credentials", ".terraform.d", ".vault-token",
)  # fmt: skip

_CASE_INSENSITIVE = sys.platform in ("darwin", "win32")
_RESOLVE_ATTEMPTS = 3


# --- checking a path ---------------------------------------------------------


class _Located(NamedTuple):
    real: Path  # symlinks resolved
    root: Path  # the resolved allowed root that contains it
    st: os.stat_result


def resolve_path(path: PathArg, roots: Iterable[str]) -> Path:
    """The resolved form of ``path`` (a file or directory) if the policy allows it.

    Raises ValidationError_ (not absolute, does not exist) or ForbiddenError
    (outside the roots after resolving symlinks, a system directory, a credential store).
    Whether a path exists is only revealed once it is known to be allowed.
    """
    roots = list(roots)
    return _locate(path, _prepare_roots(roots), roots).real


def check_paths(paths: Iterable[PathArg] | PathArg, roots: Iterable[str]) -> list[Path]:
    """Validate every path up front, before any model call; raises on the first bad one.

    Files and directories are both accepted; anything else (a FIFO, a device) is not.
    """
    roots = list(roots)
    prepared = _prepare_roots(roots)
    return [_locate_named(p, prepared, roots).real for p in _as_list(paths)]


def _prepare_roots(roots: list[str]) -> list[Path]:
    prepared = []
    for root in roots:
        expanded = os.path.expanduser(os.fspath(root))
        if not os.path.isabs(expanded):
            raise ValueError(f"allowed root {root!r} is not an absolute path")
        try:
            prepared.append(_realpath(expanded))
        except OSError as exc:
            raise ValidationError_(
                f"allowed root {root!r} changed while being resolved: {exc.strerror or exc}",
                details={"path": root, "reason": _os_reason(exc)},
            ) from None
    return prepared


def _realpath(path: str) -> Path:
    """``os.path.realpath``, which raises when a symlink on the way is removed or
    replaced between its ``lstat`` and its ``readlink``. Tried again a few times, as
    the tree settles; then the error is the caller's to report."""
    for _ in range(_RESOLVE_ATTEMPTS - 1):
        try:
            return Path(os.path.realpath(path))
        except OSError:
            continue
    return Path(os.path.realpath(path))


def _as_list(paths: Iterable[PathArg] | PathArg) -> list[PathArg]:
    # A lone string is one path, not a sequence of one-character paths.
    if isinstance(paths, str | os.PathLike):
        return [paths]
    return list(paths)


def _locate(path: PathArg, roots: list[Path], shown_roots: list[str]) -> _Located:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValidationError_(
            f"invalid file path {path!r}: expected a non-empty absolute path",
            details={"path": repr(path), "reason": "invalid path"},
        )
    if not os.path.isabs(path):
        raise ValidationError_(
            f"file path {path!r} is not absolute; give absolute paths (the daemon does not "
            "share the client's working directory)",
            details={"path": path, "reason": "not an absolute path"},
        )
    try:
        real = _realpath(path)
    except OSError as exc:
        raise ValidationError_(
            f"{path!r} changed while being resolved ({exc.strerror or exc}); it was removed "
            "or replaced meanwhile",
            details={"path": path, "reason": _os_reason(exc)},
        ) from None
    root = next((r for r in roots if real.is_relative_to(r)), None)
    if root is None:
        via = f" (it resolves to {real})" if str(real) != path else ""
        allowed = ", ".join(shown_roots) or "none configured"
        raise ForbiddenError(
            f"{path!r} is outside the allowed roots{via}; allowed roots: {allowed} (the "
            "home directory and, on a loopback daemon, the project the client declares or "
            "the directory `exai call` runs in; EXAI_ALLOWED_ROOTS, when set, is a ceiling; "
            "see docs/files.md)",
            details={
                "path": path,
                "reason": "outside allowed roots",
                "allowed_roots": list(shown_roots),
            },
        )
    refusal = _refusal(real)
    if refusal is not None:
        raise ForbiddenError(
            f"{path!r} is refused: it is in {refusal}, which is never readable",
            details={"path": path, "reason": f"refused: {refusal}"},
        )
    try:
        st = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        raise ValidationError_(
            f"{path!r} does not exist", details={"path": path, "reason": "not found"}
        ) from None
    except OSError as exc:
        raise ValidationError_(
            f"{path!r} cannot be accessed: {exc.strerror}",
            details={"path": path, "reason": _os_reason(exc)},
        ) from None
    links = _hard_links(st)
    if links is not None:
        raise ForbiddenError(
            f"{path!r} is refused: it is {links}, and another of its names may be outside "
            "the allowed roots",
            details={"path": path, "reason": f"refused: {links}"},
        )
    return _Located(real, root, st)


def _locate_named(path: PathArg, roots: list[Path], shown_roots: list[str]) -> _Located:
    located = _locate(path, roots, shown_roots)
    if not (stat.S_ISREG(located.st.st_mode) or stat.S_ISDIR(located.st.st_mode)):
        raise ValidationError_(
            f"{os.fspath(path)!r} is not a regular file or a directory",
            details={"path": os.fspath(path), "reason": "not a regular file"},
        )
    return located


def _hard_links(st: os.stat_result) -> str | None:
    """What makes a file refused for its links, or None. A regular file with more
    than one name cannot be told apart from the other names, which may be anywhere
    on the same filesystem, so none of them is read."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return f"one of {st.st_nlink} hard links to the same file"
    return None


def _refusal(real: Path) -> str | None:
    """What makes ``real`` unreadable whatever the roots say, or None."""
    key = _fold(str(real))
    for prefix, label in _denied_prefixes(os.path.expanduser("~")):
        if key == prefix or key.startswith(prefix + os.sep):
            return label
    for part in real.parts[1:]:
        if _fold(part) in CREDENTIAL_DIR_NAMES:
            return f"a credential store ({part})"
    if _fold(real.name) in CREDENTIAL_FILE_NAMES:
        return f"a credential file ({real.name})"
    return None


@lru_cache(maxsize=4)
def _denied_prefixes(home: str) -> tuple[tuple[str, str], ...]:
    entries = [(d, f"a system directory ({d})") for d in SYSTEM_DIRS]
    for base in dict.fromkeys((home, "/root")):
        entries += [
            (os.path.join(base, rel), f"a credential store (~/{rel})") for rel in HOME_CREDENTIALS
        ]
    denied: dict[str, str] = {}
    for prefix, label in entries:
        try:
            resolved = str(_realpath(prefix))
        except OSError as exc:  # not cached: the list is only complete once it resolves
            raise ValidationError_(
                f"{prefix!r} changed while being resolved ({exc.strerror or exc})",
                details={"path": prefix, "reason": _os_reason(exc)},
            ) from None
        for form in (prefix, resolved):
            if form != os.sep:
                denied.setdefault(_fold(form), label)
    return tuple(denied.items())


def _fold(text: str) -> str:
    return text.casefold() if _CASE_INSENSITIVE else text


def _os_reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "not found"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return f"unreadable ({exc.strerror or exc})"
