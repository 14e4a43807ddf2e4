"""DESCRIBE and DESCRIPTION (docs/protocol.md, section 16), by their old import path:
the codec is the wire layer's, `melissa_trainer.wire.predict_describe` (the messages,
`described`, `is_describe`) and `melissa_trainer.wire.predict` (`decode_answer`, which
reads any reply of the serving channel). Re-exported here for the code and tests that
import them from `stream`; new code imports them from `wire`.
"""

from __future__ import annotations

__all__ = []
