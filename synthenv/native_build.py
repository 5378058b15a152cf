"""Build, verify and cache synthenv's C sources: one module for every native library.

synthenv's C code sits beside the Python module it serves: the VM (``engines/vm.h``, shared
by the OpenMP entry point ``engines/native.c`` and the CUDA one ``engines/cuda.cu``), the
traditional compiler's passes (``compilers/traditional.c``), the scorer (``scoring.c``), the
benchmark's naive interpreter (``naive.c``) and the agents' operators (``agents/search/variation.c``,
``agents/run/feedback.c``). The enums and lookup tables they share with Python are generated from
the Python sources into ``tables.h`` (``synthenv/shared_tables.py``; a test fails when the file
is stale), never retyped by hand.

Each module that owns C code declares its own library here, by name, with its sources and
the symbols they export, and binds its functions through it; this module never imports
the packages it builds for, and what a library contains never depends on what was imported
before it::

    LIBRARY = native_build.register(__name__, ["scoring.c"], beside=__file__, exports=("synthenv_score",))
    score = LIBRARY.bind("synthenv_score", [ctypes.c_void_p, ...], None)  # built and loaded at first use
    if LIBRARY.is_available(): ...                                         # else the torch code

A library is compiled at first use with the system C compiler (``$CC``, else ``cc``, ``gcc``
or ``clang``), cached on disk and loaded with ctypes. A cached build is trusted only after
checks, so a damaged cache costs a rebuild, never a crash (SIGBUS/SIGSEGV) or wrong advice:

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
from dataclasses import dataclass
from pathlib import Path

from synthenv.registry import UnknownNameError, unknown_name_message

PACKAGE = Path(__file__).resolve().parent
"""The ``synthenv`` package folder."""
INCLUDE_DIRS = (PACKAGE, PACKAGE / "engines")
"""Where ``#include "x.h"`` is looked up after the including file's own folder."""
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
"""Flags of the shared libraries (``-march=native``: the CPU is part of the cache key, see ``cpu_identity``)."""
CPUINFO = Path("/proc/cpuinfo")
"""Where Linux describes the CPU (``cpu_identity``)."""
INSTALL_HINT = "install a C compiler with OpenMP (e.g. `apt-get install gcc`) or point $CC at one"
CACHE_HINT = "point $SYNTHENV_CACHE_DIR at a directory of your own (e.g. export SYNTHENV_CACHE_DIR=~/.cache/synthenv)"


class NativeBuildError(RuntimeError):
    """The C sources could not be compiled or loaded."""


class NativeCacheError(NativeBuildError):
    """The build cache directory cannot be used safely (the message names it and the fix)."""


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


def load_library(path: Path, exports: Sequence[str]) -> ctypes.CDLL:
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


def check_library(path: Path, exports: Sequence[str]) -> None:
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


def build(sources: Sequence[Path], flags: Sequence[str] = FLAGS, suffix: str = ".so", compiler: str | None = None,
          exports: Sequence[str] = (), name: str = "synthenv") -> Path:
    """Compile ``sources`` with ``flags`` unless a verified build with the same key is cached; return its path.

    ``suffix`` ``.so`` builds a shared library (checked to load and export ``exports``);
    anything else an executable (checked non-empty and executable).

    Raises:
        NativeCacheError: the cache directory is unusable (see ``ensure_cache_dir``).
        NativeBuildError: no compiler, the compiler failed (its message is included), or it
            produced something that is not a working library.
    """
    sources = tuple(Path(s) for s in sources)
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


# ---- libraries: each module that owns C code declares one ---------------------------------------


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Library:
    """A shared library of synthenv's: its C sources, the symbols they export, its flags.

    Declared with ``register`` by the module it serves; built (or taken from the verified cache)
    and loaded once per process, at first use. Its cached file is ``<name>-<key>.so``.

    Attributes:
        name: a unique name, by convention the declaring module's (``"synthenv.scoring"``).
        sources: its C files (``#include "x.h"`` is inlined by ``expand_source``).
        exports: the symbols it must export (checked before a build is cached and before it is
            loaded); ``bind`` binds only these.
        flags: compiler flags.
    """

    name: str
    sources: tuple[Path, ...]
    exports: tuple[str, ...]
    flags: tuple[str, ...] = FLAGS

    def path(self) -> Path:
        """The verified build's path, compiling it first if the cache has none (see ``build``)."""
        return build(self.sources, self.flags, exports=self.exports, name=self.name)

    def load(self) -> ctypes.CDLL:
        """The loaded library (built and loaded once per process).

        Raises:
            NativeBuildError: no compiler, a failed compile, or a file that does not load.
            NativeCacheError: the cache directory is unusable.
        """
        if self.name not in _loaded:
            path = self.path()
            try:
                _loaded[self.name] = load_library(path, self.exports)
            except NativeBuildError as error:
                raise NativeBuildError(f"could not load synthenv's native library {self.name!r}: {error}") from None
        return _loaded[self.name]

    def bind(self, symbol: str, argtypes: Sequence, restype=ctypes.c_int):
        """The function ``symbol`` (one of ``exports``) with its ctypes signature set; loads the library."""
        if symbol not in self.exports:
            raise ValueError(f"library {self.name!r} does not declare {symbol!r}; it exports {list(self.exports)} "
                             "(add the symbol to its register(..., exports=...) call)")
        function = getattr(self.load(), symbol)
        function.argtypes = list(argtypes)
        function.restype = restype
        return function

    def is_available(self) -> bool:
        """Whether this library builds and loads here (asked once per process; ``reset`` forgets).

        When the cache directory is the problem (a compiler is there, so "install one" would be
        the wrong advice), warns once per process, in one line naming the fix; callers then use
        the torch code.
        """
        if self.name not in _available:
            try:
                self.load()
            except NativeBuildError as error:
                _errors[self.name] = error
                if isinstance(error, NativeCacheError) and not _state["warned"]:
                    _state["warned"] = True
                    warnings.warn(f"synthenv: native code unavailable, using the torch engine and scorer: {error}",
                                  RuntimeWarning, stacklevel=2)
            _available[self.name] = self.name not in _errors
        return _available[self.name]

    def unavailable_reason(self) -> NativeBuildError | None:
        """Why ``is_available()`` returned False (None if it was available or not yet asked)."""
        return _errors.get(self.name)


_libraries: dict[str, Library] = {}
_loaded: dict[str, ctypes.CDLL] = {}
_available: dict[str, bool] = {}
_errors: dict[str, NativeBuildError] = {}
_state = {"warned": False}  # the cache warning is given once per process, not once per library


def register(name: str, sources: Sequence[Path | str], exports: Sequence[str], flags: Sequence[str] = FLAGS,
             beside: Path | str | None = None) -> Library:
    """Declare the library ``name`` (see ``Library``) and return it; nothing is built until it is used.

    ``beside``: a file (the declaring module's ``__file__``) whose folder relative ``sources``
    are in. Declaring the same library again (a module reloaded) returns the one registered;
    another declaration under a registered name is an error.

    >>> LIBRARY = register("synthenv.naive", ["naive.c"], beside=PACKAGE / "naive.py", exports=("synthenv_naive",))
    >>> LIBRARY is get("synthenv.naive"), LIBRARY.sources[0].name
    (True, 'naive.c')

    Raises:
        ValueError: a bad name, a missing source, no exports, a symbol another library exports, or
            ``name`` declared otherwise.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"a library name is letters, digits and '_.-' (it names the cached file), got {name!r}")
    folder = Path(beside).resolve().parent if beside is not None else Path.cwd()
    library = Library(name, tuple((folder / s).resolve() for s in sources), tuple(exports), tuple(flags))
    missing = [str(s) for s in library.sources if not s.is_file()]
    if not library.sources or missing:
        raise ValueError(f"library {name!r} needs existing C sources, got {[str(s) for s in sources]} "
                         f"(missing: {missing}; relative names are looked up beside {str(folder)!r})")
    if not library.exports or len(set(library.exports)) != len(library.exports):
        raise ValueError(f"library {name!r} must export distinct symbols, got {list(exports)}")
    taken = {s: other.name for other in _libraries.values() if other.name != name for s in other.exports}
    if set(library.exports) & set(taken):
        clashes = {s: taken[s] for s in library.exports if s in taken}
        raise ValueError(f"library {name!r} exports symbols that other libraries export: {clashes}; "
                         "a C function belongs to one library")
    known = _libraries.setdefault(name, library)
    if known != library:
        raise ValueError(f"library {name!r} is already registered with other sources, exports or flags "
                         f"({known}); pick another name")
    return known


def get(name: str) -> Library:
    """The library registered as ``name`` (an unknown name raises ``UnknownNameError``, with a hint)."""
    if name not in _libraries:
        raise UnknownNameError(unknown_name_message("native library", name, list(_libraries)))
    return _libraries[name]


def libraries() -> tuple[Library, ...]:
    """The libraries registered so far, in registration order (``import synthenv`` registers the
    engine's, the compiler's, the scorer's and the naive interpreter's; ``synthenv.agents`` its own)."""
    return tuple(_libraries.values())


def bind(symbol: str, argtypes: Sequence, restype=ctypes.c_int):
    """The function ``symbol`` of whichever registered library exports it, with its signature set.

    For code that does not hold the declaring module's ``Library``; prefer ``Library.bind``.

    Raises:
        UnknownNameError: no registered library exports ``symbol`` (is its module imported?).
    """
    for library in _libraries.values():
        if symbol in library.exports:
            return library.bind(symbol, argtypes, restype)
    exported = sorted(s for library in _libraries.values() for s in library.exports)
    raise UnknownNameError(unknown_name_message("native symbol", symbol, exported)
                           + " Import the module that declares its library first.")


def is_available() -> bool:
    """Whether every library registered so far builds and loads here (see ``Library.is_available``).

    For code that does not hold its ``Library``; a module that does asks its own.
    """
    return all(library.is_available() for library in _libraries.values())


def unavailable_reason() -> NativeBuildError | None:
    """Why a registered library is unavailable (the first, in registration order), or None."""
    return next((_errors[name] for name in _libraries if name in _errors), None)


def reset() -> None:
    """Forget loaded libraries and availability (after changing ``$CC`` or the cache directory).

    Declarations stay; a library loaded before stays mapped in this process, but is loaded
    again (from the new cache) by the next ``load``.
    """
    _loaded.clear()
    _available.clear()
    _errors.clear()
    _state["warned"] = False
