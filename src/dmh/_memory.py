"""Giving freed memory back to the system between the stages of a large fit.

glibc's allocator serves allocations below its mmap threshold (which grows to 32 MiB as large
blocks are freed) from heaps that it shrinks only from their top: after a stage of a 10^5-object
fit has freed its many mid-sized temporaries, the process can keep hundreds of MiB that nothing
uses, and the next stage's arrays come on top. :func:`release_free_memory` asks glibc to return
every such free page (``malloc_trim(0)``); elsewhere (macOS, Windows, musl) it does nothing.
No value computed by the fit depends on it."""

from __future__ import annotations

import ctypes
import sys

_TRIM = None


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system (glibc ``malloc_trim(0)``). Returns whether
    it could ask (``False`` where the C library has no such call)."""
    global _TRIM
    if _TRIM is None:
        _TRIM = False
        if sys.platform.startswith("linux"):
            try:
                trim = ctypes.CDLL("libc.so.6").malloc_trim
            except (OSError, AttributeError):
                pass
            else:
                trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
                _TRIM = trim
    if not _TRIM:
        return False
    _TRIM(0)
    return True
