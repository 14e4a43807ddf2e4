"""A shim preloaded into a C client's process (LD_PRELOAD) that sets
``ZMQ_HANDSHAKE_IVL`` on each socket just before it connects over TCP (the C client has
no setter for it), so that handshake timeouts come in seconds, not 30 s: `build_shim`.
(tests/c/test_c_handshake_silent_keyed.py has its own, at 2.5 s.)"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from compiled import CClient

__all__ = ["build_shim"]

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <zmq.h>
int zmq_connect(void *s, const char *address) {
    static int (*real)(void *, const char *);
    if (real == NULL) real = (int (*)(void *, const char *))dlsym(RTLD_NEXT, "zmq_connect");
    if (strncmp(address, "tcp://", 6) == 0) {
        int ivl = IVL_MS;
        zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &ivl, sizeof ivl);
    }
    return real(s, address);
}
"""


def build_shim(out: Path, ivl_ms: int, c_client: CClient) -> str:
    """The LD_PRELOAD value for a shim of `ivl_ms` built in `out` (after ASan's runtime,
    which must come first, when the C client is built with it: MT_TEST_SANITIZE)."""
    compiler = shutil.which("gcc") or "cc"
    (out / "shim.c").write_text(SHIM.replace("IVL_MS", str(ivl_ms)))
    subprocess.run(
        [compiler, "-shared", "-fPIC", str(out / "shim.c"), "-o", str(out / "shim.so"), "-ldl"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    if not c_client.sanitize:
        return str(out / "shim.so")
    asan = subprocess.run(
        [compiler, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return f"{asan} {out / 'shim.so'}"
