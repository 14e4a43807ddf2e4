"""The C client's quote of a value (clients/c/src/z85.c ``mt_py_repr``) escapes what
the Python client's ``repr`` escapes under Python 3.11, including code points whose
printability changed between Unicode versions. ``str.isprintable`` is Unicode-version
dependent: Python 3.10 uses Unicode 13.0.0, 3.11 14.0.0, 3.12 15.0.0, 3.13 15.1.0 (each
``unicodedata.unidata_version``). The C table (clients/c/src/py_printable.c, written by
clients/c/tools/make_py_printable.py) is one version's: 14.0.0, Python 3.11's, the
project's. So a code point assigned in Unicode 14 (U+061D, U+0870, U+1FAE0) is written
raw by both under 3.11, escaped by 3.10's repr; one assigned in 15.0 or later (U+1F6DC,
U+0CF3, U+2FFC) is escaped by both under 3.11, raw in 3.12's or 3.13's repr. Under
another Python the clients differ on such code points only (they cannot agree with
every version at once: a C library has one table); test_c_key_repr.py checks the whole
table against make_py_printable.py under a Python of the table's version.

Each character is quoted through the "endpoints must be like" error (client.c
``mt_set_endpoints``, client/config.py ``resolve_receivers``): compared with the
Python client's message under Python 3.11, and with the Unicode 14 verdict pinned here
under any Python. No fix came with this test: the table already agreed (a guard)."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from c_driver import run_script
from compiled import C_SOURCE

from melissa_trainer.client import Client

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EINVAL = 1
TABLE_VERSION = "14.0.0"
#: code point -> printable under Unicode 14.0.0 (what the C table says), and why chosen
UNICODE_14 = {
    0x00E9: True,  # é: printable in every version
    0x00AD: False,  # soft hyphen (Cf): escaped in every version
    0x2028: False,  # line separator (Zl)
    0x061D: True,  # Arabic end of text mark (Po): assigned in 14.0 (escaped by 3.10)
    0x0870: True,  # Arabic letter alef with attached fatha (Lo): 14.0
    0x1FAE0: True,  # melting face (So): 14.0
    0x0890: False,  # Arabic pound mark above (Cf): 14.0, a format character
    0x1F6DC: False,  # wireless (So): 15.0 (raw in 3.12's repr)
    0x0CF3: False,  # Kannada sign combining anusvara above right (Mc): 15.0
    0x1E030: False,  # modifier letter Cyrillic small a (Lm): 15.0
    0x31350: False,  # CJK ideograph extension H: 15.0
    0x2FFC: False,  # ideographic description character (So): 15.1 (raw in 3.13's)
    0x1B4E: False,  # Balinese inverted carik siki (Po): 16.0
}


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def test_the_table_is_of_the_version_pinned_here() -> None:
    """(UNICODE_14 holds the verdicts of the table's version)"""
    assert f"Unicode {TABLE_VERSION}:" in (C_SOURCE / "src" / "py_printable.c").read_text()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cp", sorted(UNICODE_14), ids=[f"U+{cp:04X}" for cp in sorted(UNICODE_14)])
def test_a_code_point_is_quoted_as_python_311_quotes_it(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,
    cp: int,
) -> None:
    value = f"x{chr(cp)}y"  # (no "://": refused, quoted)
    got = run_script(script_exe, f"id 1\nendpoints {value}\n", tmp_path)[2]
    escaped = f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"
    shown = f"x{chr(cp) if UNICODE_14[cp] else escaped}y"
    assert got == (MT_EINVAL, f"endpoints must be like tcp://HOST:PORT, got '{shown}'")
    if unicodedata.unidata_version == TABLE_VERSION:  # (Python 3.11: the very words)
        with pytest.raises(ValueError) as error:
            Client({"u": ((4,), "float32")}, simulation_id=1, endpoints=value)
        assert got[1] == str(error.value)
        assert chr(cp).isprintable() == UNICODE_14[cp]
