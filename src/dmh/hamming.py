"""Binary codes as bits: packing ``{-1, +1}`` codes into bytes and 64-bit words, popcount, and
Hamming distances between word-packed codes. The one implementation used by both
:mod:`dmh.metrics` (ranking) and :mod:`dmh.index` (search)."""

from __future__ import annotations

import numpy as np

from .errors import DataError, DataTypeError

__all__ = ["check_pm1", "code_words", "hamming_words", "pack_codes", "popcount_into", "to_words", "unpack_codes"]


def pack_codes(codes) -> np.ndarray:
    """``{-1, +1}`` codes ``(n, n_bits)`` -> packed ``uint8`` ``(n, ceil(n_bits / 8))``.

    ``+1`` is a set bit; bit ``j`` lands in byte ``j // 8`` at position ``j % 8``. A trailing
    partial byte is zero-padded (padding bits are 0 in every code: distances are unchanged).
    """
    arr = check_pm1(codes, "codes")
    return np.packbits(arr > 0, axis=1, bitorder="little")


def unpack_codes(packed, n_bits: int) -> np.ndarray:
    """Packed ``uint8`` codes -> ``{-1, +1}`` int8 ``(n, n_bits)``; undoes :func:`pack_codes`."""
    packed = np.asarray(packed)
    if packed.ndim != 2 or packed.dtype != np.uint8:
        raise DataError(
            f"packed codes must be a 2-D uint8 array, got {packed.dtype} {packed.shape}"
        )
    if packed.shape[1] * 8 < n_bits:
        raise DataError(f"packed codes have {packed.shape[1]} bytes, too few for {n_bits} bits")
    bits = np.unpackbits(packed, axis=1, count=n_bits, bitorder="little")
    return np.where(bits > 0, 1, -1).astype(np.int8)


def check_pm1(codes, name: str) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 2:
        raise DataError(f"{name} must be 2-D (n x n_bits), got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_) or np.iscomplexobj(arr):
        raise DataTypeError(f"{name} must be a numeric array of -1/+1, got dtype {arr.dtype}")
    if arr.dtype == np.bool_ or not np.isin(arr, (-1, 1)).all():
        raise DataError(
            f"{name} must hold only -1 and +1 (shape {arr.shape}, dtype {arr.dtype}); "
            "0/1 bits are ambiguous: map them with 2 * bits - 1"
        )
    return arr


def to_words(packed: np.ndarray) -> np.ndarray:
    """Packed uint8 ``(n, code_size)`` -> zero-padded uint64 words ``(n, ceil(code_size / 8))``."""
    n, size = packed.shape
    n_words = max(1, -(-size // 8))
    buf = np.zeros((n, n_words * 8), dtype=np.uint8)
    buf[:, :size] = packed
    return buf.view(np.uint64)


if hasattr(np, "bitwise_count"):  # numpy >= 2

    def popcount_into(words: np.ndarray, out: np.ndarray) -> np.ndarray:
        return np.bitwise_count(words, out=out)

else:  # pragma: no cover - numpy 1.26
    _BYTE_POP = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)

    def popcount_into(words: np.ndarray, out: np.ndarray) -> np.ndarray:
        b = words.view(np.uint8).reshape(*words.shape, 8)
        out[...] = _BYTE_POP[b].sum(axis=-1, dtype=out.dtype)
        return out


def hamming_words(q_words: np.ndarray, d_words: np.ndarray, n_bits: int) -> np.ndarray:
    """Hamming distances ``(n_q, n_d)`` between word-packed codes; uint8 if ``n_bits < 256``."""
    dtype = np.uint8 if n_bits < 256 else np.uint16
    n_q, n_d = q_words.shape[0], d_words.shape[0]
    xor = np.empty((n_q, n_d), dtype=np.uint64)
    out = np.zeros((n_q, n_d), dtype=dtype)
    tmp = np.empty((n_q, n_d), dtype=np.uint8) if q_words.shape[1] > 1 else out
    for w in range(q_words.shape[1]):
        np.bitwise_xor(q_words[:, w, None], d_words[None, :, w], out=xor)
        if tmp is out:
            popcount_into(xor, out)
        else:
            popcount_into(xor, tmp)
            out += tmp
    return out


def code_words(codes: np.ndarray) -> np.ndarray:
    """``{-1, +1}`` codes ``(n, n_bits)`` -> zero-padded uint64 words (``+1`` a set bit)."""
    return to_words(np.packbits(np.asarray(codes) > 0, axis=1, bitorder="little"))
