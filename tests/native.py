"""For tests of the C code: skip only where no C compiler is installed, never hide a build that fails.

A test that skipped whenever a native library was unavailable would pass, skipped, on a machine where the C code
stopped compiling; ``require_native`` skips (with the reason) only when there is no compiler at all, and
otherwise loads the library, so a failed build fails the test with the compiler's message.
"""

from __future__ import annotations

import pytest

from synthenv import native_build


def require_native(library: native_build.Library | None = None) -> None:
    """Skip when no C compiler is installed; else load ``library`` (default: every registered one) or fail."""
    if native_build.find_compiler() is None:
        pytest.skip("no C compiler installed here: synthenv's C code is not built (the torch code runs instead)")
    for lib in [library] if library is not None else native_build.libraries():
        lib.load()  # a NativeBuildError here is a failure, with the compiler's message
