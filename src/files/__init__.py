"""Safe file access: the one place where a path from a client becomes file contents.

A tool that takes files sends their contents to a third-party model, so every path
a client gives is untrusted input. The policy, enforced here and nowhere else:

* Paths must be absolute: the daemon does not share the client's working directory,
  so a relative path would silently mean something else.
* After every symlink is resolved the path must lie inside one of the allowed roots
  (``EXAI_ALLOWED_ROOTS``), and never in a system directory or a credential store,
  even when a root contains one (a root of ``/`` still cannot read ``/etc``).
* A path the caller named that breaks the policy raises :class:`ForbiddenError` or
  :class:`ValidationError_` before anything is opened, so the caller gets a clear error.
  Entries found while expanding a directory are skipped with a reason instead, so one
  stray symlink does not make a whole project unreadable.
* Files are opened beneath their root one component at a time with ``O_NOFOLLOW``:
  a directory or file swapped for a symlink after the check makes the open fail
  instead of following it out of the root. Nothing outside the roots is ever opened.
* A regular file with more than one hard link is refused. Its names are equal:
  nothing tells the one inside the roots from one elsewhere on the filesystem (a
  link to ``~/.aws/credentials`` made inside a project is that file), so a file is
  read only when it has no other name. The count is checked when the path is
  checked and again, with ``fstat``, on the very descriptor that is then read, so
  a link made in between is caught too.
* A path that changes while it is being checked (a symlink on the way removed or
  replaced) is refused like any path that cannot be resolved: ``VALIDATION_ERROR``
  naming the path when the caller named it, a "files not included" reason when it
  was found in a directory. Races never surface as internal errors.
* Directories expand in a stable sorted order with the usual exclusions; whatever is
  not included (excluded, binary, too large, over the token budget) is listed with a
  reason, never dropped silently.

Text detection: a file is text if it starts with a UTF-8/16/32 byte-order mark and
decodes accordingly, or has no NUL byte in its first 8 KiB and decodes as strict
UTF-8. Anything else is skipped as binary: replacement characters would hand the
model a corrupted file without anyone noticing. Line ends follow Python's universal
newlines (``\\r\\n``, ``\\r``, ``\\n``), which is also how editors number lines.

Everything here blocks; async callers use the ``a*`` wrappers, which run on a worker
thread so the event loop is never held up by a slow disk.
"""

from exai.files.policy import PathArg, check_paths, resolve_path
from exai.files.read import (
    DEFAULT_MAX_FILE_BYTES,
    FileBundle,
    acheck_paths,
    aread_file_text,
    aread_files,
    format_block,
    read_file_text,
    read_files,
)
from exai.files.walk import DEFAULT_MAX_FILES, EXCLUDED_DIRS, expand_paths

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_FILE_BYTES",
    "EXCLUDED_DIRS",
    "FileBundle",
    "PathArg",
    "acheck_paths",
    "aread_file_text",
    "aread_files",
    "check_paths",
    "expand_paths",
    "format_block",
    "read_file_text",
    "read_files",
    "resolve_path",
]
