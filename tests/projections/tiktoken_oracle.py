"""tiktoken itself as the oracle for token counts, fed chatledger's packaged encoding files.

tiktoken's own constructor and parser build the encoding, so tests compare the estimator with
tiktoken rather than with itself; only the download is replaced by the packaged file.
"""

from __future__ import annotations

import functools
import os
from importlib.resources import files
from unittest import mock

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public

PACKAGED = files("projections") / "encodings"


@functools.cache
def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's ``name`` encoding (``cl100k_base`` or ``o200k_base``), built without network."""
    path = str(PACKAGED / f"{name}.tiktoken")

    def load_packaged(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        # An empty cache dir makes tiktoken read the path in place and cache nothing.
        with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": ""}):
            return tiktoken.load.load_tiktoken_bpe(path, expected_hash)

    constructor = tiktoken_ext.openai_public.ENCODING_CONSTRUCTORS[name]
    with mock.patch.object(tiktoken_ext.openai_public, "load_tiktoken_bpe", load_packaged):
        return tiktoken.Encoding(**constructor())
