"""Toy data and fitting for the CVH, IMH and CMFH tests (baselines with linear hash functions)."""

import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dmh import CrossModalData
from dmh.baselines.cmfh import CMFH
from dmh.baselines.cvh import CVH
from dmh.baselines.imh import IMH

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
WIKI = DATA / "wiki" / "wiki_data.mat"
CLASSES = {"cvh": CVH, "imh": IMH, "cmfh": CMFH}


def _views(n=90, d1=12, d2=9, n_clusters=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_clusters, size=n)
    latent = rng.normal(size=(n_clusters, 4))[y] + 0.3 * rng.normal(size=(n, 4))
    image = latent @ rng.normal(size=(4, d1)) + 0.2 * rng.normal(size=(n, d1)) + 1.5
    text = latent @ rng.normal(size=(4, d2)) + 0.2 * rng.normal(size=(n, d2)) - 0.7
    return image, text, y


def _data(n=90, seed=0, **kw):
    image, text, y = _views(n=n, seed=seed, **kw)
    return CrossModalData(image=image, text=text, labels=y)


def _fit(name, data, n_bits=8, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CLASSES[name](n_bits, random_state=0, **params).fit(data)
