"""A streamed replay's peak memory grew with the trace (312 MiB at 100 M requests, over the 300 MiB bound)
because pyarrow's default pool, mimalloc, kept the freed record batches' segments. The command line now asks
Arrow for the system allocator before pyarrow first allocates; a user's own choice is kept."""

from __future__ import annotations

import subprocess
import sys

CHILD = ("import os, sys; from ftlscope import cli; cli.main(['sim', 'list']);"
         " import pyarrow as pa; print(pa.default_memory_pool().backend_name, file=sys.stderr)")


def _backend(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True)
    return done.stderr.strip().splitlines()[-1]


def test_the_command_line_streams_batches_through_the_system_allocator():
    import os

    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _backend(env) == "system"


def test_a_users_own_pool_is_kept():
    import os

    assert _backend({**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}) == "mimalloc"
