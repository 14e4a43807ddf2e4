"""A shim preloaded into a C client's process (LD_PRELOAD) that sets
``ZMQ_HANDSHAKE_IVL`` on each socket just before it connects over TCP (the C client has
no setter for it), so that handshake timeouts come in seconds, not 30 s: `build_shim`,
`shim_source`."""

from __future__ import annotations

from pathlib import Path

from compiled import CClient, preload_shim

__all__ = ["build_shim", "shim_source"]

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


def shim_source(ivl_ms: int) -> str:
    """The shim's C source, setting `ivl_ms` ms."""
    return SHIM.replace("IVL_MS", str(ivl_ms))


def build_shim(out: Path, ivl_ms: int, c_client: CClient) -> str:
    """The LD_PRELOAD value for a shim of `ivl_ms` built in `out` (`compiled.preload_shim`:
    after ASan's runtime, which must come first, when the C client is built with it:
    MT_TEST_SANITIZE)."""
    return preload_shim(c_client, shim_source(ivl_ms), out)
