"""Toy data and fitting for the LSSH, STMH and FSH tests (baselines trained on paired objects only)."""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dmh import CrossModalData
from dmh.baselines.fsh import FSH
from dmh.baselines.lssh import LSSH
from dmh.baselines.stmh import STMH

N_BITS = 8

# small settings so that every fit takes a fraction of a second
FAST = {
    "lssh": dict(n_atoms=24, max_iter=6, lasso_max_iter=20),
    "stmh": dict(max_iter=15),
    "fsh": dict(n_anchors=12, n_neighbors=4, max_iter=30),
}
CLASSES = {"lssh": LSSH, "stmh": STMH, "fsh": FSH}


def _toy(n=90, seed=0, image_mask=None, text_mask=None):
    rng = np.random.default_rng(seed)
    c = 3
    y = np.arange(n) % c
    image = rng.normal(size=(c, 10))[y] * 2 + rng.normal(size=(n, 10))
    text = np.abs(rng.normal(size=(c, 7))[y] * 2 + rng.normal(size=(n, 7)))
    return CrossModalData(image=image, text=text, labels=y, image_mask=image_mask,
                          text_mask=text_mask)


def _fit(name, data=None, **params):
    kw = dict(FAST[name], random_state=0)
    kw.update(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CLASSES[name](N_BITS, **kw).fit(_toy() if data is None else data)




METHODS = list(CLASSES)
