"""Independent tasks (one fit each) in worker processes: the ``jobs=N`` of the one cell loop,
:func:`dmh.evaluation.run_cells` (``--jobs`` of ``dmh reproduce``, ``dmh evaluate`` and ``dmh tune``).

N workers share dmh's thread setting (:func:`dmh.get_threads`): each runs ``threads // N`` threads
(at least one), so a task's result is the one a serial run at that thread count gives (same seed,
same codes). The next task goes to whichever worker is free. Results reach the caller in this
process, one at a time, as they finish (to be saved at once); the list returned is in the tasks'
order. If a task fails, no further task starts; the running ones finish and are handed over before
the error is raised, so nothing computed is lost. Ctrl-C stops the workers.

Workers are "spawn"ed (a fresh interpreter each): forking a process whose OpenMP or torch pools
already run can hang the child. Each worker gets ``state`` (the data) once, when it starts, so
memory grows about N-fold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .errors import ParameterError

__all__ = ["MAX_JOBS", "check_jobs", "run_in_workers"]

#: the most worker processes ``jobs`` accepts (far above any machine's cores)
MAX_JOBS = 1024

_STATE: dict = {}  # a worker's state: what run_in_workers passed, plus what its tasks keep (caches)


def check_jobs(jobs) -> int:
    """``jobs`` checked: an integer from 1 to :data:`MAX_JOBS`."""
    import numbers

    if isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or not 1 <= jobs <= MAX_JOBS:
        raise ParameterError(f"jobs must be an integer from 1 to {MAX_JOBS}, got {jobs!r}")
    return int(jobs)


def _start(state: dict, n_threads: int, methods: dict) -> None:
    import signal

    from ._threads import set_threads
    from .registry import METHODS

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    set_threads(n_threads)  # before a fit imports torch
    METHODS.update(methods)  # the methods registered in the parent (dmh.register_method)
    _STATE.clear()
    _STATE.update(state)


def _call(task: Callable[[dict, object], object], item):
    try:
        return task(_STATE, item)
    except Exception as exc:
        raise portable(exc) from None


def portable(exc: Exception) -> Exception:
    """``exc`` if it survives the trip to the parent process (pickled and rebuilt as the same type
    with the same message), else an equivalent that does: a :class:`dmh.errors.DmhError` keeps its
    message as a :class:`ParameterError` (still one line at the CLI), anything else becomes a
    RuntimeError carrying the worker's traceback (a bug, reported as one)."""
    import pickle
    import traceback

    from .errors import DmhError

    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
    except Exception:  # noqa: BLE001 - any failure to rebuild it means: send a stand-in
        pass
    if isinstance(exc, DmhError):
        return ParameterError(str(exc))
    return RuntimeError("a worker's task failed:\n" + "".join(traceback.format_exception(exc)))


def split_line(n_items: int, jobs: int) -> str:
    """The line saying how :func:`run_in_workers` splits ``n_items`` fits over ``jobs`` workers."""
    from ._threads import get_threads

    jobs = max(1, min(jobs, n_items))
    return f"{n_items} fit(s) in {jobs} worker processes of {max(1, get_threads() // jobs)} thread(s) each"


def run_in_workers(task: Callable[[dict, object], object], items: Sequence, *, jobs: int, state: dict,
                   on_result: Callable[[int, object], None] | None = None,
                   echo: Callable[[str], None] | None = None) -> list:
    """``[task(state, item) for item in items]``, computed in ``jobs`` worker processes.

    ``task`` is a module-level function (found by name in the workers) taking the worker's state
    (``state`` as given, plus anything earlier tasks kept in it, such as a cache) and one item.
    ``on_result(i, result)`` runs here as each task finishes. ``echo`` gets one line saying how the
    work is split.
    """
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from ._threads import get_threads
    from .registry import registered_methods

    jobs = check_jobs(jobs)
    if not items:
        return []
    jobs = min(jobs, len(items))
    n_threads = max(1, get_threads() // jobs)
    if echo is not None:
        echo(split_line(len(items), jobs))
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
                               initargs=(state, n_threads, registered_methods()))
    results: dict[int, object] = {}
    failure: BaseException | None = None
    try:
        index = {pool.submit(_call, task, item): i for i, item in enumerate(items)}
        pending = set(index)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=index.get):
                if fut.cancelled():
                    continue
                try:
                    result = fut.result()
                except Exception as exc:  # the first failure stops new tasks; running ones finish
                    if failure is None:
                        failure = exc
                        for other in pending:
                            other.cancel()
                    continue
                results[index[fut]] = result
                if on_result is not None:
                    on_result(index[fut], result)
    except BaseException:  # Ctrl-C, or on_result failing: stop the workers now (finished results are handed over)
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    if isinstance(failure, BrokenProcessPool):  # a worker was killed (most often: out of memory)
        from .errors import ResourceError

        raise ResourceError(
            f"a worker process of jobs={jobs} ended abruptly (killed, most often for lack of memory: each worker "
            f"holds the data and one fit); the {len(results)} finished before it are kept: run again with "
            "fewer jobs"
        ) from None
    if failure is not None:
        raise failure
    return [results[i] for i in range(len(items))]
