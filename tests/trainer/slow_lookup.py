"""A library that slows ``getnameinfo`` in a process it is preloaded into
(``LD_PRELOAD``): torch's store client looks the store's address up in reverse as it
connects, and a DNS query lost costs the resolver's timeout (5 s by default). For
tests/trainer/test_store_slow_answer.py and test_refusal_read_one_connection.py.

`compile_library` builds it (needs ``cc``); `environment` is what the process is given:
each lookup after the first `skip` takes `seconds`, and first creates the file `flag`
when one is given (a test waits for it: the process is in that lookup)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["compile_library", "environment"]

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int calls = 0;

int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host, socklen_t hostlen,
                char *serv, socklen_t servlen, int flags) {
    typedef int (*real_t)(const struct sockaddr *, socklen_t, char *, socklen_t, char *,
                          socklen_t, int);
    const char *skip = getenv("SLOW_LOOKUP_SKIP"), *wait = getenv("SLOW_LOOKUP_SECONDS");
    if (calls++ >= (skip ? atoi(skip) : 0)) {
        const char *flag = getenv("SLOW_LOOKUP_FLAG");
        FILE *made = flag ? fopen(flag, "w") : NULL;
        if (made) fclose(made);
        double s = wait ? atof(wait) : 0.0;
        struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
        nanosleep(&ts, NULL);
    }
    real_t real = (real_t)dlsym(RTLD_NEXT, "getnameinfo");
    return real(sa, salen, host, hostlen, serv, servlen, flags);
}
"""


def compile_library(where: Path) -> Path:
    """The library, built in `where`."""
    (where / "slow_lookup.c").write_text(SOURCE)
    library = where / "slow_lookup.so"
    command = ["cc", "-shared", "-fPIC", "-o", str(library), str(where / "slow_lookup.c")]
    subprocess.run([*command, "-ldl"], check=True, timeout=60)
    return library


def environment(
    library: Path, seconds: float, skip: int = 0, flag: Path | None = None
) -> dict[str, str]:
    """This process's environment with `library` preloaded: each lookup after the first
    `skip` takes `seconds`, having created `flag` (if given)."""
    slow = {"SLOW_LOOKUP_SECONDS": str(seconds), "SLOW_LOOKUP_SKIP": str(skip)}
    if flag is not None:
        slow["SLOW_LOOKUP_FLAG"] = str(flag)
    return {**os.environ, "LD_PRELOAD": str(library), **slow}
