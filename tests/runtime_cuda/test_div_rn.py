"""div_rn (kernels/infer_words.cuh): a / b from b's rounded reciprocal, one product and one fused
correction, must give __fdiv_rn's bits — the int8 plan's LayerNorm and quantizer divide with it. The
identity is IEEE arithmetic (a rounded reciprocal, a rounded product, fused multiply-adds), the same on the
CPU as on the GPU, so it is checked here with the emulator's headers against C++'s own division."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

import emulator
from emu_infer import EMU, HERE
from litenet.gpu import sources

CHECK = r"""
#include "emu.h"
#include "emu_infer.h"
#include "infer_words.cuh"

static float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Pairs that differ from a / b: random a and b over 80 and 40 binades (either sign of a), then every
// mantissa of a in [1, 2) against divisors whose mantissas are near 0, near all ones, and random.
extern "C" long div_rn_mismatches(long random_pairs, int divisors) {
    uint64_t s = 88172645463325252ull;
    auto next = [&]() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; };
    long bad = 0;
    for (long i = 0; i < random_pairs; ++i) {
        const uint64_t r = next();
        const uint32_t ea = 127 - 40 + r % 81, eb = 127 - 20 + (r >> 8) % 41;
        const float a = from_bits(((uint32_t)(r >> 16) & 0x807fffffu) | ea << 23);
        const float b = from_bits(((uint32_t)(r >> 40) & 0x007fffffu) | eb << 23);
        bad += div_rn(a, b, __frcp_rn(b)) != a / b;
    }
    for (int j = 0; j < divisors; ++j) {
        const uint32_t m = j % 3 == 0 ? j / 3 : j % 3 == 1 ? 0x7fffffu - j / 3 : (uint32_t)next() & 0x7fffffu;
        const float b = from_bits(m | 127u << 23), y = __frcp_rn(b);
        for (uint32_t ma = 0; ma < (1u << 23); ++ma) {
            const float a = from_bits(ma | 127u << 23);
            bad += div_rn(a, b, y) != a / b;
        }
    }
    return bad;
}
"""


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    folder = tmp_path_factory.mktemp("div_rn")
    (folder / "check.cpp").write_text(CHECK)
    lib = folder / "check.so"
    subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-w", f"-I{EMU}", f"-I{HERE}",
                    f"-I{sources.source_path('infer_words.cuh').parent}", "-o", str(lib), str(folder / "check.cpp")],
                   check=True)
    fn = ctypes.CDLL(str(lib)).div_rn_mismatches
    fn.restype, fn.argtypes = ctypes.c_long, [ctypes.c_long, ctypes.c_int]
    return fn


def test_div_rn_gives_the_rounded_quotient(check):
    assert emulator.available()
    assert check(20_000_000, 24) == 0
