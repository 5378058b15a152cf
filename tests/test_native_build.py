"""synthenv.native_build: the shared tables, include expansion, the libraries each module declares, and a
build cache that a damaged or hostile cache directory, or another machine's CPU, cannot turn into a crash or
wrong advice."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import synthenv
import synthenv.agents  # noqa: F401  (declares the agents' libraries)
from synthenv import engines, native_build, native_cache, shared_tables
from synthenv.native_build import NativeBuildError, NativeCacheError

needs_cc = pytest.mark.skipif(native_build.find_compiler() is None, reason="no C compiler")
FLAGS = ("-O0", "-fPIC", "-shared")


def test_tables_header_is_generated_from_the_python_sources():
    """tables.h (op codes, statuses, token ids, lexing tables) equals what the Python enums give;
    regenerate it with shared_tables.write_tables_header() after changing them."""
    assert shared_tables.TABLES_HEADER.read_text() == shared_tables.tables_header()


def test_tables_header_tracks_the_python_enums(monkeypatch):
    from synthenv.compilers import traditional

    monkeypatch.setattr(traditional, "MOVE_DELTA", (0, 2, -1, 0, 0, 0, 0, 0, 0))
    assert shared_tables.TABLES_HEADER.read_text() != shared_tables.tables_header()


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


OWNERS = {"synthenv.engines.native": ("engines/native.c",), "synthenv.compilers.traditional": ("traditional.c",),
          "synthenv.scoring": ("scoring.c",), "synthenv.naive": ("naive.c",),
          "synthenv.agents.search.rows": ("variation.c",), "synthenv.agents.run.feedback": ("feedback.c",)}
"""Every module that owns C code, and the sources of the library it declares."""


def test_every_module_with_c_code_declares_its_own_library():
    libraries = {library.name: library for library in native_build.libraries()}
    assert set(OWNERS) <= set(libraries)
    for name, sources in OWNERS.items():
        module = sys.modules[name]
        assert module.LIBRARY is libraries[name] is native_build.get(name)
        assert [str(s) for s in libraries[name].sources] == [str(Path(module.__file__).parent / Path(s).name)
                                                             for s in sources]
        for source in libraries[name].sources:
            assert "#include \"" not in native_build.expand_source(source)
    every_c_file = {p.resolve() for folder in ("synthenv", "compilers", "agents")
                    for p in (Path(__file__).parents[1] / folder).rglob("*.c") if p.name != "driver.c"}
    assert every_c_file == {s for library in libraries.values() for s in library.sources}  # none left out


@needs_cc
def test_each_library_exports_its_own_symbols_only():
    """One library per module: the scorer's does not carry the agents' operators (nothing depends on what
    was imported before)."""
    scoring = native_build.get("synthenv.scoring").load()
    assert hasattr(scoring, "synthenv_score") and not hasattr(scoring, "synthenv_apply_edits")
    variation = native_build.get("synthenv.agents.search.rows")
    assert hasattr(variation.load(), "synthenv_apply_edits") and not hasattr(variation.load(), "synthenv_score")
    with pytest.raises(ValueError, match=r"does not declare 'synthenv_score'.*synthenv_apply_edits"):
        variation.bind("synthenv_score", [])
    function = native_build.bind("synthenv_loop_iterations", [ctypes.c_int64] * 3, ctypes.c_int64)  # by symbol
    assert function(-1, 3, 256) == 3
    with pytest.raises(native_build.UnknownNameError, match="Did you mean 'synthenv_score'"):
        native_build.bind("synthenv_scor", [])


def test_the_build_module_imports_none_of_the_packages_it_builds_for():
    import ast

    for module, allowed in ((native_build, {"synthenv", "synthenv.registry", "synthenv.native_cache"}), (native_cache, set())):
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert {m for m in imported if m and m.startswith("synthenv")} == allowed, module.__name__


def test_register_checks_its_declaration(tmp_path):
    source = tiny(tmp_path)
    first = native_build.register("test.tiny", ["tiny.c"], beside=source, exports=("synthenv_probe",))
    try:
        assert first.sources == (source.resolve(),) and first.flags == native_build.FLAGS
        assert native_build.register("test.tiny", [source], exports=("synthenv_probe",)) is first  # a reload
        with pytest.raises(ValueError, match="'test.tiny' is already registered with other sources"):
            native_build.register("test.tiny", [source], exports=("synthenv_probe", "other"))
        with pytest.raises(native_build.UnknownNameError, match="Did you mean 'test.tiny'"):
            native_build.get("test.tin")
    finally:
        native_build._libraries.pop("test.tiny")
    with pytest.raises(ValueError, match=r"missing: \['.*nothere\.c'\]"):
        native_build.register("test.missing", ["nothere.c"], beside=source, exports=("f",))
    with pytest.raises(ValueError, match="distinct symbols"):
        native_build.register("test.none", [source], exports=())
    with pytest.raises(ValueError, match=r"other libraries export: \{'synthenv_score': 'synthenv.scoring'\}"):
        native_build.register("test.clash", [source], exports=("synthenv_score",))
    with pytest.raises(ValueError, match="names the cached file"):
        native_build.register("../escape", [source], exports=("f",))
    assert not {"test.missing", "test.clash"} & {library.name for library in native_build.libraries()}


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
    monkeypatch.setattr(native_cache, "cpu_identity", lambda: dict(CPU_A))
    built_on_a = build_tiny(source)
    assert compiles(log) == 1 and build_tiny(source) == built_on_a and compiles(log) == 1  # cached on A
    record_a = json.loads(built_on_a.with_name(built_on_a.name + ".json").read_text())
    assert record_a["cpu"] == CPU_A

    monkeypatch.setattr(native_cache, "cpu_identity", lambda: dict(CPU_B))  # the same cache, seen from B
    assert not native_cache.verify(built_on_a)  # A's record is not B's: never loaded on B
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
        assert not native_cache.verify(built_on_b)
        assert build_tiny(source) == built_on_b and compiles(log) == before + 1
        assert json.loads(record_path.read_text())["cpu"] == CPU_B and native_cache.verify(built_on_b)
    monkeypatch.setattr(native_cache, "cpu_identity", lambda: dict(CPU_A))  # back on A: A's build still loads
    assert build_tiny(source) == built_on_a and compiles(log) == 4


def _key_on(cpu, monkeypatch, compiler):
    with monkeypatch.context() as patch:
        patch.setattr(native_cache, "cpu_identity", lambda: dict(cpu))
        return native_build.build_key(["x"], str(compiler), FLAGS)


def test_cpu_identity_reads_the_first_processor_of_proc_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t\t: fpu  sse2 avx2\n\n"
                       "processor\t: 1\nmodel name\t: Another core\nflags\t\t: fpu\n")
    assert native_cache.cpu_identity(cpuinfo) == {"model": "Example CPU 9000", "flags": "fpu sse2 avx2"}
    arm = tmp_path / "cpuinfo-arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd aes\nCPU part\t: 0xd0c\n")
    fallback = platform.processor() or platform.machine()
    assert native_cache.cpu_identity(arm) == {"model": fallback, "flags": "fp asimd aes"}
    assert native_cache.cpu_identity(tmp_path / "missing") == {"model": fallback, "flags": ""}  # not Linux


@pytest.mark.skipif(not native_cache.CPUINFO.is_file(), reason="no /proc/cpuinfo (not Linux)")
def test_cpu_identity_is_this_machines_cpu():
    lines = native_cache.CPUINFO.read_text().splitlines()
    first = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines[:lines.index("")])}
    cpu = native_cache.cpu_identity()
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
    assert not native_cache.verify(path)
    rebuilt = build_tiny(source)
    assert rebuilt == path and native_cache.verify(path)
    assert ctypes.CDLL(str(path)).synthenv_probe() == 7
    assert len(path.read_bytes()) == len(good)


@needs_cc
def test_a_truncated_library_in_the_real_cache_costs_a_rebuild_not_a_crash(tmp_path, cache):
    """The half-length .so that used to SIGBUS every process, even with engine='torch'."""
    paths = {library.name: library.path() for library in native_build.libraries()}
    for path in paths.values():
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    code = textwrap.dedent("""
        import synthenv
        for engine in ("torch", "native"):
            result = synthenv.score([",[>,]+[,<.]", "+[]"], "reverse", engine=engine)
            print(result.solved.tolist())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SYNTHENV_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[True, False]"] * 2
    used = ("synthenv.compilers.traditional", "synthenv.engines.native", "synthenv.scoring")
    assert all(native_cache.verify(paths[name]) for name in used)  # rebuilt at first use
    assert not native_cache.verify(paths["synthenv.agents.run.feedback"])  # not used: not loaded, not rebuilt yet


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
    assert native_cache.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("SYNTHENV_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert native_cache.cache_dir() == tmp_path / "xdg" / "synthenv"


def test_a_world_writable_cache_is_refused(tmp_path, cache):
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(NativeCacheError, match=r"writable by every user.*chmod 700"):
        native_cache.ensure_cache_dir()


@pytest.mark.parametrize("where", ["file", "proc"])
def test_an_unusable_cache_dir_is_a_clear_error(tmp_path, monkeypatch, where):
    path = tmp_path / "a-file" if where == "file" else "/proc/synthenv-cache"
    if where == "file":
        path.write_text("x")
    monkeypatch.setenv("SYNTHENV_CACHE_DIR", str(path))
    with pytest.raises(NativeCacheError, match=r"build cache .* SYNTHENV_CACHE_DIR"):
        native_cache.ensure_cache_dir()


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
    monkeypatch.setattr(shared_tables, "TABLES_HEADER", target)
    shared_tables.write_tables_header()
    assert target.read_text() == shared_tables.tables_header()


@needs_cc
def test_a_cache_folder_its_group_can_write_is_refused(cache):
    cache.mkdir(mode=0o700)
    cache.chmod(0o770)
    with pytest.raises(NativeCacheError, match="writable by its group .* chmod 700"):
        native_cache.ensure_cache_dir()


@needs_cc
def test_a_cached_library_others_can_write_or_another_user_owns_is_rebuilt_not_loaded(tmp_path, cache):
    """Only a file the current user owns and nobody else can write is loaded: a 0666 .so (or one owned by
    another user, as root can make it) could have been replaced by anyone."""
    source = tiny(tmp_path)
    built = build_tiny(source)
    assert native_cache.verify(built)
    built.chmod(0o666)
    assert not native_cache.verify(built)
    rebuilt = build_tiny(source)
    assert rebuilt == built and native_cache.verify(rebuilt) and stat.S_IMODE(rebuilt.stat().st_mode) & 0o022 == 0
    if os.getuid() == 0:  # only root can give a file away
        os.chown(built, 65534, 65534)
        assert not native_cache.verify(built)
        assert native_cache.verify(build_tiny(source)) and built.stat().st_uid == 0


@needs_cc
def test_a_full_disk_during_a_build_is_a_build_error_naming_the_cause(tmp_path, cache, monkeypatch):
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(NativeBuildError, match="No space left on device.*free space"):
        build_tiny(_source(tmp_path))
    assert not any(cache.glob("tiny-*.so"))


def _source(tmp_path):
    source = tmp_path / "src" / "tiny.c"
    source.parent.mkdir(exist_ok=True)
    with open(source, "w") as f:  # Path.write_text is the one that fails here
        f.write("int synthenv_probe(void) { return 7; }\n")
    return source


@needs_cc
def test_a_record_path_that_is_a_folder_is_named_with_the_fix(tmp_path, cache):
    source = tiny(tmp_path)
    built = build_tiny(source)
    record = built.with_name(built.name + ".json")
    record.unlink()
    record.mkdir()
    with pytest.raises(NativeCacheError, match="holds a folder where a build belongs.*remove it"):
        build_tiny(source)


@needs_cc
def test_cc_may_carry_options_and_a_wrong_cc_is_named(tmp_path, cache, monkeypatch):
    compiler = native_build.find_compiler()
    monkeypatch.setenv("CC", f"{compiler} -O1")
    assert native_build.compiler_command()[1:] == ["-O1"]
    assert native_cache.verify(build_tiny(tiny(tmp_path)))
    monkeypatch.setenv("CC", "no-such-cc -O2")
    assert native_build.find_compiler() is None
    with pytest.raises(NativeBuildError, match=r"\$CC='no-such-cc -O2' names no program on PATH"):
        build_tiny(tiny(tmp_path, value=8))


@needs_cc
def test_a_library_that_cannot_be_built_warns_once_with_the_cause_where_a_compiler_is_there(tmp_path, cache,
                                                                                             monkeypatch):
    """The API falls back to the torch code then, but says why (not "install a compiler": one is there)."""
    import errno

    library = native_build.Library("tiny-warned", (_source(tmp_path),), ("synthenv_probe",))
    monkeypatch.setattr(Path, "write_text", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    native_build.reset()
    try:
        with pytest.warns(RuntimeWarning, match="native code unavailable.*full"):
            assert not library.is_available()
        assert native_build.warned() and "full" in str(library.unavailable_reason())
    finally:
        native_build.reset()
