import pytest
from threadpoolctl import threadpool_limits

from .paired_toys import CLASSES, _fit


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # small problems: multi-threaded BLAS only adds contention on a shared 2-core machine
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def fitted():
    """LSSH, STMH and FSH fitted once on the toy data of :mod:`.paired_toys`."""
    return {name: _fit(name) for name in CLASSES}
