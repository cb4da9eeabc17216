"""tiktoken encodings, loaded offline: chat memory must never hang on a download.

Where an encoding's data file comes from, in order:

1. the copy shipped inside this package, ``projections/encodings/<name>.tiktoken`` (only
   ``cl100k_base`` and ``o200k_base``: every ``gpt-4*``, ``gpt-3.5*``, ``o*`` and ``gpt-5*``
   model);
2. the blob tiktoken would have cached, ``$TIKTOKEN_CACHE_DIR/sha1(url)`` (or
   ``$DATA_GYM_CACHE_DIR``, or tiktoken's default ``<tmp>/data-gym-cache``), for the older
   encodings (``p50k_base``, ``r50k_base``, ...);
3. otherwise :class:`EncodingUnavailableError`, raised at once.

Every file is checked against tiktoken's published sha256 before use, so the source never
changes the counts, and each encoding is parsed once per process. tiktoken itself is never
asked to load a file (it would download one it cannot find), and is imported only when the
first encoding is built, which keeps it out of ``import projections``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlog.errors import EncodingUnavailableError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    import tiktoken

__all__ = ["EncodingUnavailableError", "get_encoding"]


@dataclass(frozen=True)
class _EncodingSpec:
    """What tiktoken's own constructor (``tiktoken_ext.openai_public``) would build."""

    url: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]
    explicit_n_vocab: int | None = None


_R50K = "r50k_base"
_P50K = "p50k_base"
_P50K_EDIT = "p50k_edit"
_CL100K = "cl100k_base"
_O200K = "o200k_base"
_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
_P50K_SHA256 = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
_R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# Copied from tiktoken_ext.openai_public (tiktoken 0.14); a test compares them with tiktoken's.
# We cannot call those constructors: without a cached file they download.
_SPECS: dict[str, _EncodingSpec] = {
    _R50K: _EncodingSpec(
        url=_BLOB + "r50k_base.tiktoken",
        sha256="306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        pat_str=_R50K_PAT,
        special_tokens={_ENDOFTEXT: 50256},
        explicit_n_vocab=50257,
    ),
    _P50K: _EncodingSpec(
        url=_BLOB + "p50k_base.tiktoken",
        sha256=_P50K_SHA256,
        pat_str=_R50K_PAT,
        special_tokens={_ENDOFTEXT: 50256},
        explicit_n_vocab=50281,
    ),
    _P50K_EDIT: _EncodingSpec(
        url=_BLOB + "p50k_base.tiktoken",
        sha256=_P50K_SHA256,
        pat_str=_R50K_PAT,
        special_tokens={
            _ENDOFTEXT: 50256,
            _FIM_PREFIX: 50281,
            _FIM_MIDDLE: 50282,
            _FIM_SUFFIX: 50283,
        },
    ),
    _CL100K: _EncodingSpec(
        url=_BLOB + "cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PAT,
        special_tokens={
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    _O200K: _EncodingSpec(
        url=_BLOB + "o200k_base.tiktoken",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PAT,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

# The encodings shipped in projections/encodings/ (package data). The files are tiktoken's own
# downloads, byte for byte, under readable names; the sha256 above is still checked on load.
_PACKAGED = frozenset({_CL100K, _O200K})

_ENCODINGS: dict[str, tiktoken.Encoding] = {}
# One lock for all loads: a second thread waiting for the same 3 MB parse beats parsing twice.
_ENCODINGS_LOCK = threading.Lock()


def get_encoding(encoding_name: str) -> tiktoken.Encoding:
    """Return the tiktoken encoding ``encoding_name``, loaded offline once per process.

    Args:
        encoding_name: One of tiktoken's OpenAI encodings, e.g. ``"o200k_base"``.

    Returns:
        The encoding, shared by every caller.

    Raises:
        EncodingUnavailableError: If no local, hash-matching copy of its data file exists.
        KeyError: If ``encoding_name`` is not an encoding tiktoken knows.
    """
    encoding = _ENCODINGS.get(encoding_name)
    if encoding is None:
        with _ENCODINGS_LOCK:
            encoding = _ENCODINGS.get(encoding_name)
            if encoding is None:
                encoding = _load_encoding(encoding_name)
                _ENCODINGS[encoding_name] = encoding
    return encoding


def _packaged_dir() -> Traversable:
    """The folder holding the shipped ``<name>.tiktoken`` files."""
    # importlib.resources also finds them in a zipped install; imported here, not at the top,
    # because only the first load needs it.
    from importlib.resources import files

    return files("projections") / "encodings"


def _tiktoken_cache_dir() -> str | None:
    """Return the directory tiktoken's ``read_file_cached`` uses, or None if caching is off."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        import tempfile  # only this fallback needs it

        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None


def _read_verified(path: Traversable, sha256: str) -> tuple[bytes | None, str]:
    """Return the file's bytes if it exists and matches ``sha256``, else None and the reason."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except OSError as error:
        return None, f"unreadable: {error}"
    if hashlib.sha256(data).hexdigest() != sha256:
        # tiktoken would delete it and download again; we leave the file alone.
        return None, "sha256 mismatch"
    return data, "ok"


def _parse_bpe(data: bytes) -> dict[bytes, int]:
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }


def _load_encoding(encoding_name: str) -> tiktoken.Encoding:
    spec = _SPECS[encoding_name]
    cache_key = hashlib.sha1(spec.url.encode()).hexdigest()  # noqa: S324 - tiktoken's file naming
    looked_at: list[str] = []
    data: bytes | None = None

    if encoding_name in _PACKAGED:
        packaged = _packaged_dir() / f"{encoding_name}.tiktoken"
        data, reason = _read_verified(packaged, spec.sha256)
        looked_at.append(f"chatledger's packaged copy {packaged} ({reason})")

    if data is None:
        cache_dir = _tiktoken_cache_dir()
        if cache_dir is None:
            looked_at.append("tiktoken cache (disabled: its directory variable is set to '')")
        else:
            cache_path = Path(cache_dir) / cache_key
            data, reason = _read_verified(cache_path, spec.sha256)
            looked_at.append(f"{cache_path} ({reason})")

    if data is None:
        remedy = (
            f"Remedy: copy {spec.url} (sha256 {spec.sha256}) to <dir>/{cache_key} and set "
            "TIKTOKEN_CACHE_DIR=<dir>"
        )
        if encoding_name in _PACKAGED:
            remedy += ", or reinstall chatledger to restore its packaged copy"
        raise EncodingUnavailableError(encoding_name, looked_at, remedy + ".")

    import tiktoken  # deferred: ~5 ms that `import projections` should not pay

    return tiktoken.Encoding(
        encoding_name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_bpe(data),
        special_tokens=dict(spec.special_tokens),
        explicit_n_vocab=spec.explicit_n_vocab,
    )
