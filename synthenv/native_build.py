"""Build, verify and cache synthenv's C sources: one module for every native library.

synthenv's C code sits beside the Python module it serves: the VM (``engines/vm.h``, shared
by the OpenMP entry point ``engines/native.c`` and the CUDA one ``engines/cuda.cu``), the
traditional compiler's passes (``compilers/traditional.c``), the scorer (``scoring.c``) and the
benchmark's naive interpreter (``naive.c``). The enums and lookup tables they share with
Python are generated from the Python sources into ``tables.h`` (``tables_header``; a test
fails when the file is stale), never retyped by hand.

This module compiles them into one shared library at first use with the system C compiler
(``$CC``, else ``cc``, ``gcc`` or ``clang``), caches it on disk and loads it with ctypes.
A cached build is trusted only after checks, so a damaged cache costs a rebuild, never a
crash (SIGBUS/SIGSEGV) or wrong advice:

- The cache directory (``$SYNTHENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/synthenv`` or
  ``~/.cache/synthenv``) is created with mode 0700; a world-writable one is refused, an
  unusable one (a file, ``/proc/x``) is a clear ``NativeCacheError``.
- A build is compiled to a temporary file, checked (a library that loads, in a child process,
  and exports every expected symbol; an executable that is non-empty and executable), then renamed into
  place atomically, with a record beside it (``<name>.json``: size, SHA-256, compiler, flags,
  source hash, and the CPU it was built on).
- Before loading, the file must match its record (size and SHA-256) and the record must name this
  machine's CPU; otherwise it is rebuilt.
- The CPU (``cpu_identity``: its model and feature flags) is part of the cache key: ``-march=native``
  code uses every instruction the building CPU has, so a cache shared between machines (a home
  directory on a cluster) must never hand a build from a newer CPU to an older one, which would die
  with SIGILL at the first instruction it lacks.

Includes: ``#include "x.h"`` is resolved by ``expand_source`` against the including file's
folder and ``INCLUDE_DIRS`` and inlined (with ``#line`` markers, so compiler messages name the
real files), so that the cache key hashes every line that is compiled, and the CUDA engine
hands NVRTC a single self-contained source.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
"""The ``synthenv`` package folder."""
INCLUDE_DIRS = (PACKAGE, PACKAGE / "engines")
"""Where ``#include "x.h"`` is looked up after the including file's own folder."""
TABLES_HEADER = PACKAGE / "tables.h"
"""Enums and lookup tables shared by C, CUDA and Python (generated, see ``tables_header``)."""


def _compilers_dir() -> Path:
    from synthenv import compilers  # the ``compilers/`` folder (installed as synthenv.compilers)

    return Path(compilers.__file__).resolve().parent


def _agents_dir() -> Path:
    from synthenv import agents  # the ``agents/`` folder (installed as synthenv.agents)

    return Path(agents.__file__).resolve().parent


def library_sources() -> tuple[Path, ...]:
    """The C files of synthenv's shared library, one per job."""
    return (PACKAGE / "engines" / "native.c", _compilers_dir() / "traditional.c", PACKAGE / "scoring.c",
            PACKAGE / "naive.c", _agents_dir() / "variation.c", _agents_dir() / "feedback.c")


EXPORTS = ("synthenv_run", "synthenv_loop_iterations", "synthenv_compile", "synthenv_score", "synthenv_naive",
           "synthenv_apply_edits", "synthenv_splice", "synthenv_row_hashes", "synthenv_program_lengths",
           "synthenv_feedback_features", "synthenv_top_unique")
"""Symbols the shared library must export (checked before a build is cached or loaded)."""
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
"""Flags of the shared library (``-march=native``: the CPU is part of the cache key, see ``cpu_identity``)."""
CPUINFO = Path("/proc/cpuinfo")
"""Where Linux describes the CPU (``cpu_identity``)."""
INSTALL_HINT = "install a C compiler with OpenMP (e.g. `apt-get install gcc`) or point $CC at one"
CACHE_HINT = "point $SYNTHENV_CACHE_DIR at a directory of your own (e.g. export SYNTHENV_CACHE_DIR=~/.cache/synthenv)"


class NativeBuildError(RuntimeError):
    """The C sources could not be compiled or loaded."""


class NativeCacheError(NativeBuildError):
    """The build cache directory cannot be used safely (the message names it and the fix)."""


# ---- the shared tables -------------------------------------------------------------------------


def tables_header() -> str:
    """The text of ``tables.h``, generated from the Python enums and tables.

    Op codes (``synthenv.ir.Op``), statuses (``synthenv.language.Status``), token ids
    (``synthenv.language``), and the traditional compiler's token classes and lexing tables
    (``compilers/traditional.py``). ``write_tables_header()`` rewrites the file.
    """
    from synthenv import language
    from synthenv.compilers import traditional
    from synthenv.ir import Op

    def enum(prefix: str, items) -> str:
        return "enum { " + ", ".join(f"{prefix}{name} = {int(value)}" for name, value in items) + " };"

    def table(name: str, values) -> str:
        return f"static const signed char {name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};"

    tokens = [("EOS", language.EOS), ("RIGHT", language.RIGHT), ("LEFT", language.LEFT), ("INC", language.INC),
              ("DEC", language.DEC), ("OPEN", language.OPEN), ("CLOSE", language.CLOSE), ("OUT", language.OUTPUT),
              ("IN", language.INPUT)]
    classes = [(name, getattr(traditional, name)) for name in traditional.CLASS_NAMES]
    io = [int(c in (traditional.OUT, traditional.IN)) for c in traditional.TOKEN_CLASS]
    lines = [
        "/* Generated from the Python sources by synthenv.native_build.tables_header(); do not edit.",
        " * Regenerate with synthenv.native_build.write_tables_header(); tests/test_native_build.py fails when",
        " * this file and the Python enums or tables differ. */",
        "#ifndef SYNTHENV_TABLES_H",
        "#define SYNTHENV_TABLES_H",
        "/* synthenv.ir.Op */",
        enum("OP_", [(op.name, op.value) for op in Op]),
        "/* synthenv.language.Status */",
        enum("ST_", [(status.name, status.value) for status in language.Status]),
        "/* synthenv.language token ids */",
        enum("T_", tokens),
        "#ifdef SYNTHENV_LEX_TABLES",
        "/* compilers/traditional.py: token classes and the lexing tables (indexed by token id) */",
        enum("C_", classes),
        table("syn_token_class", traditional.TOKEN_CLASS),
        table("syn_move_delta", traditional.MOVE_DELTA),
        table("syn_add_delta", traditional.ADD_DELTA),
        table("syn_token_io", io),
        table("syn_class_op", [int(traditional.CLASS_TO_OP[c]) for c in range(len(classes))]),
        "#endif /* SYNTHENV_LEX_TABLES */",
        "#endif /* SYNTHENV_TABLES_H */",
        "",
    ]
    return "\n".join(lines)


# ---- sources -----------------------------------------------------------------------------------

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')


def expand_source(path: Path, include_dirs: Sequence[Path] = INCLUDE_DIRS) -> str:
    """``path``'s text with every ``#include "x.h"`` inlined once (``#line`` markers keep names).

    Raises:
        NativeBuildError: an included file exists in none of the folders.
    """
    seen: set[Path] = set()

    def expand(file: Path) -> list[str]:
        file = file.resolve()
        if file in seen:  # include guards, without relying on them
            return []
        seen.add(file)
        out = [f'#line 1 "{file.name}"']
        for number, line in enumerate(file.read_text().splitlines(), start=1):
            match = _INCLUDE.match(line)
            if match is None:
                out.append(line)
                continue
            name = match.group(1)
            found = next((d / name for d in (file.parent, *include_dirs) if (d / name).is_file()), None)
            if found is None:
                raise NativeBuildError(f'{file}:{number}: #include "{name}" not found in {file.parent} or '
                                       f"{[str(d) for d in include_dirs]}")
            out.extend(expand(found))
            out.append(f'#line {number + 1} "{file.name}"')
        return out

    return "\n".join(expand(Path(path))) + "\n"


# ---- the cache directory -----------------------------------------------------------------------


def cache_dir() -> Path:
    """Where builds live: ``$SYNTHENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/synthenv`` or ``~/.cache/synthenv``."""
    if os.environ.get("SYNTHENV_CACHE_DIR"):
        return Path(os.environ["SYNTHENV_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "synthenv"


def ensure_cache_dir() -> Path:
    """The cache directory, created with mode 0700 if missing, checked safe to build in.

    Raises:
        NativeCacheError: it cannot be created or written, is not a directory, or is writable
            by other users (anyone could then plant a library that synthenv loads).
    """
    path = cache_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as error:
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} cannot be used ({error.strerror or error}); "
                               f"{CACHE_HINT}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} is not a directory; {CACHE_HINT}")
    if info.st_mode & stat.S_IWOTH:
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} is writable by every user (mode "
                               f"{stat.S_IMODE(info.st_mode):o}), so anyone could replace the library synthenv "
                               f"loads; chmod 700 {path}, or {CACHE_HINT}")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} belongs to another user (uid {info.st_uid}); "
                               f"{CACHE_HINT}")
    if not os.access(path, os.W_OK | os.X_OK):
        raise NativeCacheError(f"synthenv's build cache {str(path)!r} is not writable; {CACHE_HINT}")
    return path


# ---- building ----------------------------------------------------------------------------------


def find_compiler() -> str | None:
    """The C compiler to use: ``$CC`` if set, else the first of ``cc``, ``gcc``, ``clang`` on PATH."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


@functools.lru_cache(maxsize=8)
def compiler_version(compiler: str) -> str:
    """What ``compiler --version`` prints (part of the cache key)."""
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise NativeBuildError(f"C compiler {compiler!r} does not run ({error}); {INSTALL_HINT}") from error
    return done.stdout


def cpu_identity(cpuinfo: Path = CPUINFO) -> dict[str, str]:
    """The CPU builds run on: ``{"model": ..., "flags": ...}`` (part of the cache key and the record).

    On Linux, the first processor's ``model name`` and ``flags`` lines of ``/proc/cpuinfo``
    (``Features`` on ARM, which has no ``flags``); where there is no such file, or no model line,
    ``platform.processor()`` (else ``platform.machine()``) is the model.

    >>> sorted(cpu_identity())
    ['flags', 'model']
    """
    model, flags = _read_cpu(cpuinfo)
    return {"model": model, "flags": flags}


@functools.lru_cache(maxsize=4)
def _read_cpu(cpuinfo: Path) -> tuple[str, str]:
    fields: dict[str, str] = {}
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or platform.processor() or platform.machine()
    flags = fields.get("flags") or fields.get("Features") or ""
    return model, " ".join(flags.split())


def build_key(texts: Sequence[str | bytes], compiler: str, flags: Sequence[str]) -> str:
    """Cache key of a build: a hash of the (expanded) sources, the compiler (path and version), the flags and
    the CPU (``cpu_identity``)."""
    cpu = cpu_identity()
    digest = hashlib.sha256()
    for part in (*texts, os.path.realpath(compiler), compiler_version(compiler), "\0".join(flags), cpu["model"],
                 cpu["flags"]):
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0\0")
    return digest.hexdigest()[:20]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record_path(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def verify(target: Path) -> bool:
    """Whether ``target`` exists, matches the record written when it was built (size, SHA-256), and was built
    on this machine's CPU (the record's ``cpu`` is ``cpu_identity()``)."""
    try:
        record = json.loads(_record_path(target).read_text())
        info = target.stat()
        return (isinstance(record, dict) and stat.S_ISREG(info.st_mode) and record.get("size") == info.st_size
                and record.get("cpu") == cpu_identity() and record.get("sha256") == _sha256(target))
    except (OSError, ValueError):
        return False


def load_library(path: Path, exports: Sequence[str] = EXPORTS) -> ctypes.CDLL:
    """``ctypes.CDLL(path)`` after checking that it exports every name in ``exports``.

    Raises:
        NativeBuildError: it does not load (junk, empty, wrong architecture) or lacks a symbol.
    """
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as error:
        raise NativeBuildError(f"{path} is not a loadable library: {error}") from None
    missing = [name for name in exports if not hasattr(lib, name)]
    if missing:
        raise NativeBuildError(f"{path} loads but lacks the symbols {missing}")
    return lib


_PROBE = ("import ctypes, sys\nlib = ctypes.CDLL(sys.argv[1])\n"
          "missing = [n for n in sys.argv[2:] if not hasattr(lib, n)]\n"
          "sys.exit(f'lacks the symbols {missing}' if missing else 0)\n")


def check_library(path: Path, exports: Sequence[str] = EXPORTS) -> None:
    """Check in a child process that ``path`` loads and exports every name in ``exports``.

    A child, so that a bad file can crash nothing here, and so that this process never maps a
    file that is not yet in its final place.

    Raises:
        NativeBuildError: it does not load or lacks a symbol (the child's message is included).
    """
    done = subprocess.run([sys.executable, "-S", "-c", _PROBE, str(path), *exports], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise NativeBuildError(f"{path} is not a loadable library: {reason}")


def _check_executable(path: Path) -> None:
    if path.stat().st_size == 0 or not os.access(path, os.X_OK):
        raise NativeBuildError(f"{path} is not an executable ({path.stat().st_size} bytes)")


def build(sources: Sequence[Path] | None = None, flags: Sequence[str] = FLAGS, suffix: str = ".so",
          compiler: str | None = None, exports: Sequence[str] = EXPORTS, name: str = "synthenv") -> Path:
    """Compile ``sources`` with ``flags`` unless a verified build with the same key is cached; return its path.

    ``suffix`` ``.so`` builds a shared library (checked to load and export ``exports``);
    anything else an executable (checked non-empty and executable).

    Raises:
        NativeCacheError: the cache directory is unusable (see ``ensure_cache_dir``).
        NativeBuildError: no compiler, the compiler failed (its message is included), or it
            produced something that is not a working library.
    """
    sources = tuple(Path(s) for s in (sources if sources is not None else library_sources()))
    compiler = compiler or find_compiler()
    if compiler is None:
        raise NativeBuildError(f"synthenv's native code needs a C compiler and found none; {INSTALL_HINT}")
    texts = [expand_source(s) for s in sources]
    flags = tuple(flags)
    directory = ensure_cache_dir()
    target = directory / f"{name}-{build_key(texts, compiler, flags)}{suffix}"
    if verify(target):
        return target
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as scratch:
        files = []
        for source, text in zip(sources, texts):
            files.append(Path(scratch) / source.name)
            files[-1].write_text(text)
        partial = Path(scratch) / f"out{suffix}"
        command = [compiler, *flags, *map(str, files), "-o", str(partial)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=scratch)
        if done.returncode != 0:
            raise NativeBuildError(f"compiling synthenv's native code failed: {' '.join(command)}\n"
                                   f"{done.stderr.strip()}\n{INSTALL_HINT}")
        if not partial.is_file():
            raise NativeBuildError(f"the C compiler {compiler!r} reported success but wrote nothing; {INSTALL_HINT}")
        try:
            check_library(partial, exports) if suffix == ".so" else _check_executable(partial)
        except NativeBuildError as error:
            raise NativeBuildError(f"the C compiler {compiler!r} produced no working {suffix} ({error}); "
                                   f"{INSTALL_HINT}") from None
        record = {"size": partial.stat().st_size, "sha256": _sha256(partial), "compiler": os.path.realpath(compiler),
                  "version": compiler_version(compiler).splitlines()[:1], "flags": list(flags), "cpu": cpu_identity(),
                  "sources": {s.name: hashlib.sha256(t.encode()).hexdigest() for s, t in zip(sources, texts)}}
        staged_record = Path(scratch) / "record.json"
        staged_record.write_text(json.dumps(record, indent=1))
        os.replace(partial, target)  # atomic: other processes see the old file or the new one, never a part
        os.replace(staged_record, _record_path(target))
    return target


# ---- the loaded library ------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """synthenv's shared library, built (or taken from the verified cache) and loaded once per process."""
    path = build()
    try:
        return load_library(path)
    except NativeBuildError as error:
        raise NativeBuildError(f"could not load synthenv's native library: {error}") from None


def bind(name: str, argtypes: Sequence, restype=ctypes.c_int):
    """The library function ``name`` with its ctypes signature set."""
    function = getattr(library(), name)
    function.argtypes = list(argtypes)
    function.restype = restype
    return function


_state: dict[str, object] = {"warned": False, "error": None}


@functools.lru_cache(maxsize=1)
def is_available() -> bool:
    """Whether the native library builds and loads here.

    When the cache directory is the problem (a compiler is there, so "install one" would be
    the wrong advice), warns once, in one line naming the fix; callers then use the torch code.
    """
    try:
        library()
    except NativeBuildError as error:
        _state["error"] = error
        if isinstance(error, NativeCacheError) and not _state["warned"]:
            _state["warned"] = True
            warnings.warn(f"synthenv: native code unavailable, using the torch engine and scorer: {error}",
                          RuntimeWarning, stacklevel=2)
        return False
    _state["error"] = None
    return True


def unavailable_reason() -> NativeBuildError | None:
    """Why ``is_available()`` last returned False (None if it was available or not yet asked)."""
    return _state["error"]  # type: ignore[return-value]


def reset() -> None:
    """Forget the loaded library and availability (after changing ``$CC`` or the cache directory)."""
    library.cache_clear()
    is_available.cache_clear()
    _state.update(warned=False, error=None)


def write_tables_header() -> None:
    """Rewrite ``tables.h`` from the Python sources (after changing an enum or lexing table)."""
    TABLES_HEADER.write_text(tables_header())
