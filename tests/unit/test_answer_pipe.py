"""The pipe the reference's child answers through holds 1 MiB (`child._widen_pipe`): an answer is
megabytes of arrays, and the child waits for verify to read each 64 KiB of a default pipe."""

from __future__ import annotations

import os
import sys

import pytest

from portkit.verify.reference import child


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_answers_pipe_is_widened() -> None:
    import fcntl

    r, w = os.pipe()
    try:
        with os.fdopen(r, "rb", closefd=False) as stream:
            before = fcntl.fcntl(r, fcntl.F_GETPIPE_SZ)
            child._widen_pipe(stream)
            assert before < child.PIPE_BYTES == fcntl.fcntl(r, fcntl.F_GETPIPE_SZ)
    finally:
        os.close(r)
        os.close(w)
