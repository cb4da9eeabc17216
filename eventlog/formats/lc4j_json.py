"""LangChain4j JSON interop: byte-identical to ``ChatMessageSerializer`` / ``Deserializer``.

The format is what LangChain4j 1.19's ``JacksonChatMessageJsonCodec`` writes:

* compact JSON; properties in Java field-declaration order, then ``"type"``;
* ``UserMessage`` omits a null or empty ``name`` and empty ``attributes`` (``NON_EMPTY``);
  everything else omits only nulls, so ``AiMessage`` always has ``"toolExecutionRequests"``
  and ``"attributes"``;
* non-ASCII is written raw; control characters use Jackson's escapes (``\\n``, ``\\u001F``);
* floats are written like Java's ``Double.toString`` (``1.0E20``, ``1.0E-5``, ``2.5``);
* ``UserMessage.attributes`` is a ``java.util.HashMap``, so its keys come out in Java hash
  order (see :func:`eventlog.java.java_hashmap_order`); the other messages keep insertion order.

Where Java's output depends on the JVM, this module matches JDK 19 and later (21, 25, ...):
JDK 17 orders a ``HashMap`` copy of 3, 6, 12, ... keys differently; ``Double.toString`` is
emulated in :mod:`eventlog.java` (with the ``HashMap`` order), shared with the token
estimator.

Reading accepts everything the serializer writes plus the legacy tool-result form with
``"text"``; anything else raises `ValueError` naming the position (``$[2].contents[0]``),
the problem and the expected form.

Writing is :mod:`eventlog.formats.lc4j_write`, reading :mod:`eventlog.formats.lc4j_read`;
this module is the format's one import path.
"""

from __future__ import annotations

from eventlog.formats.lc4j_read import message_from_json, message_from_obj, messages_from_json
from eventlog.formats.lc4j_write import message_to_json, message_to_obj, messages_to_json

__all__ = [
    "message_from_json",
    "message_from_obj",
    "message_to_json",
    "message_to_obj",
    "messages_from_json",
    "messages_to_json",
]
