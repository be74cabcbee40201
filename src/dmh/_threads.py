"""One thread setting for every thread pool dmh uses: PyTorch, BLAS / OpenMP (through
``threadpoolctl``) and faiss.

Each library starts its own pool sized to the whole machine, so several dmh processes on one
machine (or one process with torch, OpenBLAS and faiss pools all active) run many more threads than
there are cores, and spin-waiting pools then slow each other down by far more than the sharing
itself. dmh therefore runs its fits, encodings and searches under one limit.

The number of threads, in order of precedence:

1. an explicit value: ``n_threads=`` on an estimator, ``dmh.set_threads(n)``, ``dmh --threads N``
   (the CLI calls :func:`set_threads`);
2. the ``DMH_THREADS`` environment variable;
3. the ``OMP_NUM_THREADS`` environment variable (the usual way to cap every OpenMP/BLAS pool);
4. the physical cores this process may run on (its CPU affinity, SMT siblings counted once).

The thread count is part of "same seed, same codes": results are reproducible for a fixed count.
Importing this module imports neither torch nor faiss; the limits are applied to the ones already
imported (and to torch when a caller says it is about to use it).

OpenMP's wait policy is left to OpenMP (spin a while at the end of a parallel region, then
sleep). A passive wait (``OMP_WAIT_POLICY=PASSIVE``, set before torch is imported) was measured as
a default and not kept: it made a quiet paper-scale fit about 20% slower on this project's 2-core
machine (a virtual machine, where waking a sleeping thread is slow), and under load one thread per
process helps far more than a passive wait (docs/evaluation.md, "Threads and concurrent fits").
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .errors import ParameterError

__all__ = ["available_cores", "default_threads", "resolve_threads", "set_threads", "get_threads",
           "thread_limit"]

_ENV_VARS = ("DMH_THREADS", "OMP_NUM_THREADS")
_setting: int | None = None  # set by set_threads(); None: from the environment / the machine


def available_cores() -> int:
    """Physical cores this process may run on: its CPU affinity, hyper-threads of one core
    counted once (Linux topology files; elsewhere every logical CPU counts)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores.add(siblings.read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return max(1, len(cores))


#: the most threads accepted: far above any machine's cores, and below the C ``int`` that the OpenMP
#: and faiss calls take (a larger count ended in an OverflowError there)
MAX_THREADS = 4096


def _check_n(value, name: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ParameterError(f"{name} must be a positive integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    value = int(value)
    if value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value}")
    if value > MAX_THREADS:
        raise ParameterError(f"{name} must be a positive integer of at most {MAX_THREADS}, got {value}")
    return value


def default_threads() -> int:
    """The thread count used when none is given: ``DMH_THREADS``, else ``OMP_NUM_THREADS`` (its
    first entry, as OpenMP reads it), else :func:`available_cores`."""
    for var in _ENV_VARS:
        text = os.environ.get(var, "").split(",")[0].strip()
        if text:
            return _check_n(text, f"environment variable {var}")
    return available_cores()


def resolve_threads(n_threads=None) -> int:
    """``n_threads`` checked, or (``None``) the :func:`set_threads` setting, else the default."""
    if n_threads is not None:
        return _check_n(n_threads, "n_threads")
    return _setting if _setting is not None else default_threads()


def get_threads() -> int:
    """The thread count dmh uses now (see the precedence in the module docstring)."""
    return resolve_threads(None)


def set_threads(n_threads: int | None) -> int | None:
    """Set the thread count of every later dmh fit, encode and search in this process (``None``
    goes back to the environment / machine default), and apply it now to the thread pools already
    loaded (torch, BLAS/OpenMP, faiss). Returns the previous setting."""
    global _setting
    previous = _setting
    _setting = None if n_threads is None else _check_n(n_threads, "n_threads")
    n = get_threads()
    _pools().limit(limits=n)  # left in place: this is the process setting
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    faiss = sys.modules.get("faiss")
    if faiss is not None:
        faiss.omp_set_num_threads(n)
    return previous


_controller = None  # threadpoolctl's view of the loaded BLAS/OpenMP libraries ...
_controller_modules = -1  # ... taken when sys.modules held this many modules


def _pools():
    """threadpoolctl's controller of the BLAS/OpenMP pools loaded in this process.

    Finding them walks every loaded shared library (about 4 ms here with torch loaded), which was
    most of a collection search's time when done on each call; the view is taken again only when
    modules were imported since, as a library that brings a pool (torch, faiss, a BLAS) is."""
    global _controller, _controller_modules
    from threadpoolctl import ThreadpoolController

    loaded = len(sys.modules)
    if _controller is None or loaded != _controller_modules:
        _controller, _controller_modules = ThreadpoolController(), loaded
    return _controller


@contextlib.contextmanager
def faiss_threads(n_threads=None):
    """faiss's OpenMP pool limited to ``n_threads`` (resolved as above) inside the block; cheap
    enough to wrap every search call. Yields the faiss module."""
    import faiss

    n = resolve_threads(n_threads)
    before = faiss.omp_get_max_threads()
    if n != before:
        faiss.omp_set_num_threads(n)
    try:
        yield faiss
    finally:
        if n != before:
            faiss.omp_set_num_threads(before)


@contextlib.contextmanager
def thread_limit(n_threads=None, *, torch: bool = False):
    """Limit torch, BLAS/OpenMP and faiss to ``n_threads`` threads inside the block, restoring
    every pool's previous size afterwards.

    Parameters
    ----------
    n_threads : int or None
        Threads; ``None``: the :func:`set_threads` setting, else ``DMH_THREADS``, else
        ``OMP_NUM_THREADS``, else the physical cores available to this process.
    torch : bool
        Import torch first (when the block is about to use it) so that its pools are limited
        too; otherwise torch is limited only if something imported it already. Never imports
        torch when False.

    Yields the number of threads in force.
    """
    n = resolve_threads(n_threads)
    if torch:
        import torch as _torch  # noqa: F401 - loaded before threadpoolctl looks at the libraries
    pools = _pools()

    mod_torch = sys.modules.get("torch")
    mod_faiss = sys.modules.get("faiss")
    torch_before = mod_torch.get_num_threads() if mod_torch is not None else None
    faiss_before = mod_faiss.omp_get_max_threads() if mod_faiss is not None else None
    with pools.limit(limits=n):
        try:
            if mod_torch is not None and torch_before != n:
                mod_torch.set_num_threads(n)
            if mod_faiss is not None and faiss_before != n:
                mod_faiss.omp_set_num_threads(n)
            yield n
        finally:
            if mod_torch is not None and mod_torch.get_num_threads() != torch_before:
                mod_torch.set_num_threads(torch_before)
            if mod_faiss is not None and faiss_before != n:
                mod_faiss.omp_set_num_threads(faiss_before)
