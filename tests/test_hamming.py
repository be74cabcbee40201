"""Bits of binary codes: packing round trip and Hamming distances against a naive count."""

import numpy as np
import pytest

from dmh.hamming import code_words, hamming_words, pack_codes, unpack_codes


@pytest.mark.parametrize("n_bits", [1, 8, 13, 64, 70, 300])
def test_pack_round_trip_and_distances(n_bits):
    rng = np.random.default_rng(n_bits)
    q = np.where(rng.random((5, n_bits)) < 0.5, 1, -1).astype(np.int8)
    d = np.where(rng.random((9, n_bits)) < 0.5, 1, -1).astype(np.int8)
    np.testing.assert_array_equal(unpack_codes(pack_codes(q), n_bits), q)
    naive = (q[:, None, :] != d[None, :, :]).sum(-1)
    np.testing.assert_array_equal(hamming_words(code_words(q), code_words(d), n_bits), naive)


def test_zero_one_bits_are_refused():
    with pytest.raises(ValueError, match="-1 and \\+1"):
        pack_codes(np.array([[0, 1]]))
