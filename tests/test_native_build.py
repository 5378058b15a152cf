"""synthenv.native_build: the shared tables, include expansion, and a build cache that a damaged
or hostile cache directory cannot turn into a crash or wrong advice (issue 11, item 2)."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import stat
import subprocess
import sys
import textwrap

import pytest

import synthenv
from synthenv import engines, native_build
from synthenv.native_build import NativeBuildError, NativeCacheError

needs_cc = pytest.mark.skipif(native_build.find_compiler() is None, reason="no C compiler")
FLAGS = ("-O0", "-fPIC", "-shared")


def test_tables_header_is_generated_from_the_python_sources():
    """tables.h (op codes, statuses, token ids, lexing tables) equals what the Python enums give;
    regenerate it with native_build.write_tables_header() after changing them."""
    assert native_build.TABLES_HEADER.read_text() == native_build.tables_header()


def test_tables_header_tracks_the_python_enums(monkeypatch):
    from synthenv.compilers import traditional

    monkeypatch.setattr(traditional, "MOVE_DELTA", (0, 2, -1, 0, 0, 0, 0, 0, 0))
    assert native_build.TABLES_HEADER.read_text() != native_build.tables_header()


def test_includes_are_inlined_with_line_markers(tmp_path):
    (tmp_path / "a.h").write_text('#include "b.h"\nint a;\n')
    (tmp_path / "b.h").write_text("int b;\n")
    (tmp_path / "main.c").write_text('#include "a.h"\n#include "b.h"\nint main;\n')
    text = native_build.expand_source(tmp_path / "main.c", include_dirs=())
    assert [line for line in text.splitlines() if not line.startswith("#line")] == ["int b;", "int a;", "int main;"]
    assert '#line 1 "b.h"' in text and '#line 3 "main.c"' in text
    (tmp_path / "bad.c").write_text('#include "missing.h"\n')
    with pytest.raises(NativeBuildError, match=r'bad\.c:1: #include "missing\.h" not found'):
        native_build.expand_source(tmp_path / "bad.c", include_dirs=())


def test_every_library_source_expands():
    for source in native_build.library_sources():
        assert "#include \"" not in native_build.expand_source(source)


def tiny(tmp_path, name="tiny.c", value=7):
    source = tmp_path / "src" / name
    source.parent.mkdir(exist_ok=True)
    source.write_text(f"int synthenv_probe(void) {{ return {value}; }}\n")
    return source


def build_tiny(source):
    return native_build.build([source], FLAGS, exports=("synthenv_probe",), name="tiny")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("SYNTHENV_CACHE_DIR", str(path))
    return path


@needs_cc
def test_builds_are_cached_by_source_compiler_and_flags(tmp_path, cache):
    source = tiny(tmp_path)
    first = build_tiny(source)
    stamp = first.stat().st_mtime_ns
    assert build_tiny(source) == first and first.stat().st_mtime_ns == stamp  # no rebuild
    record = json.loads(first.with_name(first.name + ".json").read_text())
    assert record["size"] == first.stat().st_size and record["flags"] == list(FLAGS) and "tiny.c" in record["sources"]
    source.write_text(source.read_text() + "/* changed */\n")
    changed = build_tiny(source)
    assert changed != first and changed.exists() and first.exists()
    compiler = native_build.find_compiler()
    assert native_build.build_key(["x"], compiler, FLAGS) != native_build.build_key(["x"], compiler, FLAGS + ("-g",))
    assert all(p.parent == cache for p in (first, changed))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700  # created private


CPU_A = {"model": "Example CPU with AVX-512", "flags": "fpu sse2 avx2 avx512f"}
CPU_B = {"model": "Example older CPU", "flags": "fpu sse2"}


def logging_compiler(tmp_path):
    """A $CC that runs the real compiler and logs every compile (not ``--version``) to a file."""
    log = tmp_path / "compiles.log"
    wrapper = tmp_path / "logged-cc"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = --version ] || echo "$@" >> "{log}"\n'
                       f'exec "{native_build.find_compiler()}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def compiles(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


@needs_cc
def test_a_build_from_another_cpu_is_rebuilt_not_loaded(tmp_path, cache, monkeypatch):
    """-march=native code from a newer CPU dies with SIGILL on an older one: a cache shared between
    machines (a home directory on a cluster) keeps one build per CPU and loads only its own CPU's."""
    wrapper, log = logging_compiler(tmp_path)
    monkeypatch.setenv("CC", str(wrapper))
    source = tiny(tmp_path)
    monkeypatch.setattr(native_build, "cpu_identity", lambda: dict(CPU_A))
    built_on_a = build_tiny(source)
    assert compiles(log) == 1 and build_tiny(source) == built_on_a and compiles(log) == 1  # cached on A
    record_a = json.loads(built_on_a.with_name(built_on_a.name + ".json").read_text())
    assert record_a["cpu"] == CPU_A

    monkeypatch.setattr(native_build, "cpu_identity", lambda: dict(CPU_B))  # the same cache, seen from B
    assert not native_build.verify(built_on_a)  # A's record is not B's: never loaded on B
    built_on_b = build_tiny(source)
    assert built_on_b != built_on_a and compiles(log) == 2  # compiled for B, beside A's
    assert json.loads(built_on_b.with_name(built_on_b.name + ".json").read_text())["cpu"] == CPU_B
    assert native_build.build_key(["x"], str(wrapper), FLAGS) != _key_on(CPU_A, monkeypatch, wrapper)

    # A record that names another CPU at this very path (copied by hand, or written by an older synthenv
    # without a "cpu" field) is not trusted either: the file is rebuilt, not loaded.
    record_path = built_on_b.with_name(built_on_b.name + ".json")
    for record_cpu in (CPU_A, None):
        record = json.loads(record_path.read_text())
        record["cpu"] = record_cpu
        record_path.write_text(json.dumps(record))
        before = compiles(log)
        assert not native_build.verify(built_on_b)
        assert build_tiny(source) == built_on_b and compiles(log) == before + 1
        assert json.loads(record_path.read_text())["cpu"] == CPU_B and native_build.verify(built_on_b)
    monkeypatch.setattr(native_build, "cpu_identity", lambda: dict(CPU_A))  # back on A: A's build still loads
    assert build_tiny(source) == built_on_a and compiles(log) == 4


def _key_on(cpu, monkeypatch, compiler):
    with monkeypatch.context() as patch:
        patch.setattr(native_build, "cpu_identity", lambda: dict(cpu))
        return native_build.build_key(["x"], str(compiler), FLAGS)


def test_cpu_identity_reads_the_first_processor_of_proc_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t\t: fpu  sse2 avx2\n\n"
                       "processor\t: 1\nmodel name\t: Another core\nflags\t\t: fpu\n")
    assert native_build.cpu_identity(cpuinfo) == {"model": "Example CPU 9000", "flags": "fpu sse2 avx2"}
    arm = tmp_path / "cpuinfo-arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd aes\nCPU part\t: 0xd0c\n")
    fallback = platform.processor() or platform.machine()
    assert native_build.cpu_identity(arm) == {"model": fallback, "flags": "fp asimd aes"}
    assert native_build.cpu_identity(tmp_path / "missing") == {"model": fallback, "flags": ""}  # not Linux


@pytest.mark.skipif(not native_build.CPUINFO.is_file(), reason="no /proc/cpuinfo (not Linux)")
def test_cpu_identity_is_this_machines_cpu():
    lines = native_build.CPUINFO.read_text().splitlines()
    first = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines[:lines.index("")])}
    cpu = native_build.cpu_identity()
    assert cpu["model"] == (first.get("model name") or platform.processor() or platform.machine())
    assert cpu["flags"].split() == (first.get("flags") or first.get("Features") or "").split()


def _corrupt(kind, path, tmp_path):
    data = path.read_bytes()
    if kind == "half":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "flipped":
        flipped = bytearray(data)
        for at in range(64, len(flipped), 97):
            flipped[at] ^= 0xFF
        path.write_bytes(bytes(flipped))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "junk":
        path.write_bytes(b"not a library\n" * 50)
    elif kind == "other-library":  # a valid library, with the symbol even, but not this build
        other = native_build.build([tiny(tmp_path, "other.c", value=99)], FLAGS, exports=("synthenv_probe",),
                                   name="other")
        path.write_bytes(other.read_bytes())
    elif kind == "no-record":
        path.with_name(path.name + ".json").unlink()


@needs_cc
@pytest.mark.parametrize("kind", ["half", "flipped", "empty", "junk", "other-library", "no-record"])
def test_a_damaged_cached_build_is_rebuilt_before_it_is_loaded(tmp_path, cache, kind):
    source = tiny(tmp_path)
    path = build_tiny(source)
    good = path.read_bytes()
    _corrupt(kind, path, tmp_path)
    assert not native_build.verify(path)
    rebuilt = build_tiny(source)
    assert rebuilt == path and native_build.verify(path)
    assert ctypes.CDLL(str(path)).synthenv_probe() == 7
    assert len(path.read_bytes()) == len(good)


@needs_cc
def test_a_truncated_library_in_the_real_cache_costs_a_rebuild_not_a_crash(tmp_path, cache):
    """The half-length .so that used to SIGBUS every process, even with engine='torch'."""
    path = native_build.build()
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    code = textwrap.dedent("""
        import synthenv
        result = synthenv.score([",[>,]+[,<.]", "+[]"], "reverse", engine="torch")
        print(result.solved.tolist())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SYNTHENV_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, False]"
    assert native_build.verify(path)


def test_a_compiler_that_writes_nothing_caches_nothing(tmp_path, cache, monkeypatch):
    """`CC=true` "succeeds" with no output: an error, and no 0-byte library left to load forever."""
    monkeypatch.setenv("CC", "true")
    with pytest.raises(NativeBuildError, match=r"'.*true' .*(wrote nothing|no working)"):
        build_tiny(tiny(tmp_path))
    assert not any(p.suffix == ".so" for p in cache.iterdir())


def test_a_compiler_that_writes_junk_caches_nothing(tmp_path, cache, monkeypatch):
    fake = tmp_path / "fakecc"
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && echo fake 1.0 && exit 0\n'
                    'for a; do out=$a; done\nprintf junk > "$out"\n')  # the last argument is the output
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    with pytest.raises(NativeBuildError, match="produced no working .so.*not a loadable library"):
        build_tiny(tiny(tmp_path))
    assert not any(p.suffix == ".so" for p in cache.iterdir())


def test_compiler_errors_are_reported(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a program that exists and always fails
    with pytest.raises(NativeBuildError, match="compiling synthenv's native code failed"):
        build_tiny(tiny(tmp_path))
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    assert native_build.find_compiler() is None


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SYNTHENV_CACHE_DIR", str(tmp_path / "x"))
    assert native_build.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("SYNTHENV_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert native_build.cache_dir() == tmp_path / "xdg" / "synthenv"


def test_a_world_writable_cache_is_refused(tmp_path, cache):
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(NativeCacheError, match=r"writable by every user.*chmod 700"):
        native_build.ensure_cache_dir()


@pytest.mark.parametrize("where", ["file", "proc"])
def test_an_unusable_cache_dir_is_a_clear_error(tmp_path, monkeypatch, where):
    path = tmp_path / "a-file" if where == "file" else "/proc/synthenv-cache"
    if where == "file":
        path.write_text("x")
    monkeypatch.setenv("SYNTHENV_CACHE_DIR", str(path))
    with pytest.raises(NativeCacheError, match=r"build cache .* SYNTHENV_CACHE_DIR"):
        native_build.ensure_cache_dir()


@pytest.fixture
def fresh_native(monkeypatch):
    native_build.reset()
    monkeypatch.setattr(engines, "_warned", set())
    yield
    native_build.reset()


def test_torch_keeps_working_with_an_unusable_cache_dir(tmp_path, monkeypatch, fresh_native):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SYNTHENV_CACHE_DIR", str(blocker))
    with pytest.warns(RuntimeWarning) as caught:
        result = synthenv.score([",[>,]+[,<.]", "+."], "reverse")  # auto: torch compile, engine and scorer
    assert result.solved.tolist() == [True, False]
    messages = [str(w.message) for w in caught]
    assert any("SYNTHENV_CACHE_DIR" in m and "a-file" in m for m in messages)
    assert all("\n" not in m for m in messages)
    assert not any("install a C compiler" in m for m in messages)  # a compiler is there: not the fix
    with pytest.raises(NativeCacheError, match="a-file"):
        engines.select("native", "cpu")


def test_write_tables_header(tmp_path, monkeypatch):
    target = tmp_path / "tables.h"
    monkeypatch.setattr(native_build, "TABLES_HEADER", target)
    native_build.write_tables_header()
    assert target.read_text() == native_build.tables_header()
