"""How `portkit reference` and `portkit compare` end: bad input is one line on stderr and exit
2, never a traceback (PORTKIT_DEBUG=1 shows ours)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def guarded(command: str, body: Callable[[], int]) -> int:
    """`body()`'s exit status, with every failure turned into one line."""
    from portkit.errors import PortkitError
    from portkit.verify.errors import BadInput

    try:
        return body()
    except (BadInput, PortkitError) as e:  # verify's bad input, and lint's (a hostile safetensors header)
        message = str(e)
    except KeyboardInterrupt:
        print(f"portkit {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug of ours
        if os.environ.get("PORTKIT_DEBUG"):
            raise
        message = f"internal error: {type(e).__name__}: {e} (set PORTKIT_DEBUG=1 for the traceback)"
    print(f"portkit: error: {' '.join(message.split())}", file=sys.stderr)
    return 2
