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

A library is compiled at first use with the system C compiler (``$CC``, which may carry options of its
own, else ``cc``, ``gcc`` or ``clang``), cached on disk and loaded with ctypes. A build is compiled to a
temporary file, checked (a library that loads, in a child process, and exports every expected symbol; an
executable that is non-empty and executable), then stored in the cache (``synthenv.native_cache``: which
builds are trusted, and how one is stored); a damaged or foreign cache entry costs a rebuild, never a crash
(SIGBUS/SIGSEGV) or wrong advice. The CPU is part of the cache key (``native_cache.cpu_identity``).

Includes: ``#include "x.h"`` is resolved by ``expand_source`` against the including file's
folder and ``INCLUDE_DIRS`` and inlined (with ``#line`` markers, so compiler messages name the
real files), so that the cache key hashes every line that is compiled, and the CUDA engine
hands NVRTC a single self-contained source.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from synthenv import native_cache
from synthenv.native_cache import NativeBuildError, NativeCacheError  # noqa: F401 - re-exported
from synthenv.registry import UnknownNameError, unknown_name_message

PACKAGE = Path(__file__).resolve().parent
"""The ``synthenv`` package folder."""
INCLUDE_DIRS = (PACKAGE, PACKAGE / "engines")
"""Where ``#include "x.h"`` is looked up after the including file's own folder."""
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
"""Flags of the shared libraries (``-march=native``: the CPU is part of the cache key, see ``cpu_identity``)."""
INSTALL_HINT = "install a C compiler with OpenMP (e.g. `apt-get install gcc`) or point $CC at one"


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


# ---- building ----------------------------------------------------------------------------------


def compiler_command() -> list[str] | None:
    """The C compiler to run, as a command: ``$CC`` if set (split like a shell word list, so ``CC="gcc -O2"``
    is gcc with -O2), else the first of ``cc``, ``gcc``, ``clang`` on PATH; None if there is none.

    Raises:
        NativeBuildError: ``$CC`` is set but names no program on PATH (the message quotes it).
    """
    if os.environ.get("CC"):
        words = shlex.split(os.environ["CC"])
        found = shutil.which(words[0]) if words else None
        if found is None:
            raise NativeBuildError(f"$CC={os.environ['CC']!r} names no program on PATH; set CC to a C compiler "
                                   "(e.g. CC=gcc) or unset it to use cc, gcc or clang")
        return [found, *words[1:]]
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


def find_compiler() -> str | None:
    """The C compiler as one string (``compiler_command`` joined; None if there is none or ``$CC`` is wrong)."""
    try:
        command = compiler_command()
    except NativeBuildError:
        return None
    return shlex.join(command) if command else None


@functools.lru_cache(maxsize=8)
def compiler_version(compiler: str) -> str:
    """What ``compiler --version`` prints (part of the cache key); ``compiler`` as ``find_compiler`` gives it."""
    try:
        done = subprocess.run([*shlex.split(compiler), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise NativeBuildError(f"C compiler {compiler!r} does not run ({error}); {INSTALL_HINT}") from error
    return done.stdout


def build_key(texts: Sequence[str | bytes], compiler: str, flags: Sequence[str]) -> str:
    """Cache key of a build: a hash of the (expanded) sources, the compiler (path and version), the flags and
    the CPU (``cpu_identity``)."""
    cpu = native_cache.cpu_identity()
    digest = hashlib.sha256()
    for part in (*texts, compiler, compiler_version(compiler), "\0".join(flags), cpu["model"], cpu["flags"]):
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0\0")
    return digest.hexdigest()[:20]


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
        if os.environ.get("CC"):
            compiler_command()  # raises the error that names $CC
        raise NativeBuildError(f"synthenv's native code needs a C compiler and found none; {INSTALL_HINT}")
    texts = [expand_source(s) for s in sources]
    flags = tuple(flags)
    directory = native_cache.ensure_cache_dir()
    target = directory / f"{name}-{build_key(texts, compiler, flags)}{suffix}"
    if native_cache.verify(target):
        return target
    try:
        with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as scratch:
            _compile(sources, texts, compiler, flags, suffix, exports, Path(scratch), target)
    except OSError as error:  # a full disk, a size limit: the cause, not a traceback
        raise NativeBuildError(f"building synthenv's native code in {str(directory)!r} failed: "
                               f"{error.strerror or error}; free space there, or point $SYNTHENV_CACHE_DIR elsewhere"
                               ) from None
    return target


def _compile(sources: Sequence[Path], texts: Sequence[str], compiler: str, flags: Sequence[str], suffix: str,
             exports: Sequence[str], scratch: Path, target: Path) -> None:
    """Compile ``texts`` in ``scratch``, check the result and store it as ``target`` (see ``build``)."""
    files = []
    for source, text in zip(sources, texts):
        files.append(scratch / source.name)
        files[-1].write_text(text)
    partial = scratch / f"out{suffix}"
    command = [*shlex.split(compiler), *flags, *map(str, files), "-o", str(partial)]
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
    record = {"size": partial.stat().st_size, "sha256": native_cache.sha256(partial), "compiler": compiler,
              "version": compiler_version(compiler).splitlines()[:1], "flags": list(flags),
              "cpu": native_cache.cpu_identity(),
              "sources": {s.name: hashlib.sha256(t.encode()).hexdigest() for s, t in zip(sources, texts)}}
    native_cache.store(partial, record, target)


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

        When it does not although a C compiler is there (an unusable cache directory, a full disk, a failed
        compile: "install one" would be the wrong advice), warns once per process, in one line naming the
        cause; callers then use the torch code. Without a compiler the engines' ``auto`` choice says so.
        """
        if self.name not in _available:
            try:
                self.load()
            except NativeBuildError as error:
                _errors[self.name] = error
                if find_compiler() is not None and not _state["warned"]:
                    _state["warned"] = True
                    first = str(error).splitlines()[0]
                    warnings.warn(f"synthenv: native code unavailable, using the torch engine and scorer: {first}",
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


def warned() -> bool:
    """Whether this process was warned that native code is unavailable although a compiler is there."""
    return _state["warned"]


def reset() -> None:
    """Forget loaded libraries and availability (after changing ``$CC`` or the cache directory).

    Declarations stay; a library loaded before stays mapped in this process, but is loaded
    again (from the new cache) by the next ``load``.
    """
    _loaded.clear()
    _available.clear()
    _errors.clear()
    _state["warned"] = False
