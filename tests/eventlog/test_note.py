"""Signed notes against the reference vector of Go's golang.org/x/mod/sumdb/note."""

from __future__ import annotations

import base64

import pytest

from eventlog.note import (
    NoteError,
    Signer,
    Verifier,
    generate_key,
    key_hash,
    open_note,
    sign_note,
)

# The example of the sumdb/note package documentation.
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_NOTE = (
    PETER_TEXT + "\n"
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfq"
    "dngotpRZb6KE6RyyBwJnAM=\n"
)


def test_the_go_reference_note_verifies():
    verifier = Verifier.from_text(PETER_VKEY)
    assert (verifier.name, verifier.key_hash) == ("PeterNeumann", 0xC74F20A3)
    opened = open_note(PETER_NOTE, [verifier])
    assert opened.text == PETER_TEXT
    assert opened.signers == ("PeterNeumann",)
    assert opened.unverified == ()
    # Check bytes are read as well as text.
    assert open_note(PETER_NOTE.encode(), [verifier]) == opened


def test_the_go_reference_signer_key_reproduces_the_note():
    signer = Signer.from_text(PETER_SKEY + "\n")
    assert signer.verifier() == Verifier.from_text(PETER_VKEY)
    assert signer.to_text() == PETER_SKEY
    assert signer.verifier().to_text() == PETER_VKEY
    # Ed25519 is deterministic: the same key signs the same text to the same note.
    assert sign_note(PETER_TEXT, [signer]) == PETER_NOTE
    assert "AYEK" not in repr(signer) and "c74f20a3" in repr(signer)


def test_the_key_hash_is_sha256_of_name_newline_key():
    raw = base64.b64decode(PETER_VKEY.rsplit("+", 1)[1])
    assert key_hash("PeterNeumann", raw) == 0xC74F20A3


def test_a_fresh_key_pair_signs_and_verifies_and_round_trips_as_text():
    signer, verifier = generate_key("example.com/log")
    assert Signer.from_text(signer.to_text()) == signer
    assert Verifier.from_text(verifier.to_text()) == verifier
    assert signer.verifier() == verifier
    note = sign_note("hello\n", [signer])
    assert open_note(note, [verifier]).signers == ("example.com/log",)


def test_unknown_signatures_are_ignored_and_one_trusted_signature_is_needed():
    peter = Verifier.from_text(PETER_VKEY)
    witness, _ = generate_key("witness.example")
    cosigned = sign_note(PETER_TEXT, [Signer.from_text(PETER_SKEY), witness])
    # Check a signature by another key is kept aside, not an error (witness cosignatures).
    opened = open_note(cosigned, [peter])
    assert opened.signers == ("PeterNeumann",)
    assert len(opened.unverified) == 1 and opened.unverified[0].startswith("\u2014 witness")
    # Check a same-named key with another hash is someone else's key: not trusted.
    impostor_signer, impostor = generate_key("PeterNeumann")
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        open_note(PETER_NOTE, [impostor])
    forged = sign_note(PETER_TEXT, [impostor_signer])
    with pytest.raises(NoteError, match=r"no signature by a trusted key \(trusted: PeterNeumann"):
        open_note(forged, [peter])
    with pytest.raises(NoteError, match="trusted: none"):
        open_note(PETER_NOTE, [])


@pytest.mark.parametrize(
    "edit",
    [
        lambda n: n.replace("answer", "ANSWER"),
        lambda n: n.replace("is.\n", "is!\n", 1),
        lambda n: "Note: " + n,
    ],
)
def test_an_edited_note_is_rejected(edit):
    with pytest.raises(NoteError, match="does not verify: the note was edited"):
        open_note(edit(PETER_NOTE), [Verifier.from_text(PETER_VKEY)])


@pytest.mark.parametrize(
    ("note", "names"),
    [
        (PETER_TEXT, "no blank line before its signatures"),
        (PETER_NOTE.rstrip("\n"), "does not end with a newline"),
        (PETER_TEXT + "\n", "does not end with a newline"),
        (PETER_NOTE.replace("\u2014", "-"), "does not start with"),
        (PETER_NOTE.replace(" x08go", " !!!"), "is not NAME BASE64"),
        (PETER_TEXT + "\n\u2014 Peter+Neumann AAAAAAAA\n", "is not NAME BASE64"),
        (PETER_TEXT + "\n\u2014 PeterNeumann AAAA\n", "is not NAME BASE64"),
        (PETER_NOTE.replace("If", "If\x07"), "control character"),
        (PETER_NOTE + PETER_NOTE.split("\n\n")[1], "signed it twice"),
        (PETER_TEXT + "\n" + "\u2014 someone AAAAAAAA\n" * 101, "more than 100 signatures"),
        (b"\xff\n\n", "not UTF-8"),
    ],
)
def test_malformed_notes_are_rejected(note, names):
    with pytest.raises(NoteError, match=names) as info:
        open_note(note, [Verifier.from_text(PETER_VKEY)])
    assert info.value.reason == str(info.value)


def test_repeated_unknown_signatures_are_listed_once():
    line = "\u2014 someone AAAAAAAA\n"
    opened = open_note(PETER_NOTE + line + line, [Verifier.from_text(PETER_VKEY)])
    assert opened.unverified == (line.strip("\n"),)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("PeterNeumann+c74f20a3", r"not of the form NAME\+HASH\+BASE64"),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not of the form"),
        ("PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not of the form"),
        ("PeterNeumann+zzzzzzzz+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not of the form"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10", "not of the form"),
        ("PeterNeumann+c74f20a3+AhpcA2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not of the form"),
        ("PeterNeumann+c74f20a3+AhpC2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not Ed25519"),
        ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "was altered"),
        ("Peter+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "was altered"),
    ],
)
def test_malformed_verifier_keys_are_refused_with_a_remedy(text, names):
    with pytest.raises(ValueError, match=names) as info:
        Verifier.from_text(text)
    assert "chatledger keygen NAME" in str(info.value)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (PETER_VKEY, "does not start with PRIVATE\\+KEY\\+"),
        ("PRIVATE+KEY+PeterNeumann+c74f20a3", "not of the form PRIVATE\\+KEY\\+NAME"),
        (PETER_SKEY.replace("c74f20a3", "c74f20a4"), "was altered"),
        (PETER_SKEY.replace("+AYEK", "+AoEK"), "not Ed25519"),
    ],
)
def test_malformed_signer_keys_are_refused_with_a_remedy(text, names):
    with pytest.raises(ValueError, match=names):
        Signer.from_text(text)


def test_a_verifier_rejects_garbage_signatures():
    verifier = Verifier.from_text(PETER_VKEY)
    assert not verifier.verify(b"x", b"short")
    assert not verifier.verify(PETER_TEXT.encode(), b"\x00" * 64)


@pytest.mark.parametrize(
    ("text", "signers", "names"),
    [
        ("no newline", True, "does not end with a newline"),
        ("bell\x07\n", True, "control character"),
        ("fine\n", False, "no signer key given"),
    ],
)
def test_sign_note_refuses_what_is_not_a_note(text, signers, names):
    keys = [Signer.from_text(PETER_SKEY)] if signers else []
    with pytest.raises(ValueError, match=names):
        sign_note(text, keys)


@pytest.mark.parametrize("name", ["", "has space", "a+b", "tab\there"])
def test_generate_key_refuses_a_bad_name(name):
    with pytest.raises(ValueError, match="a key name must be non-empty, with no spaces"):
        generate_key(name)


def test_a_note_of_one_empty_line_round_trips():
    # Its blank line is the note's first two characters: still a note, as in Go's note.Open.
    signer, verifier = generate_key("log")
    note = sign_note("\n", [signer])
    assert note.startswith("\n\n")
    assert open_note(note, [verifier]).text == "\n"


def test_a_note_may_carry_exactly_the_most_signatures():
    extra = "\u2014 someone AAAAAAAA\n" * 99  # with Peter's: 100 lines, Go's limit
    opened = open_note(PETER_NOTE + extra, [Verifier.from_text(PETER_VKEY)])
    assert opened.signers == ("PeterNeumann",)


def test_a_key_whose_hash_is_zero_is_named_altered_not_malformed():
    # 00000000 is a well-formed hash: the refusal is that it does not match the key.
    key64 = PETER_VKEY.rsplit("+", 1)[1]
    with pytest.raises(ValueError, match="its hash 00000000 does not match its name and key"):
        Verifier.from_text(f"PeterNeumann+00000000+{key64}")


def test_base64_is_read_strictly_in_keys_and_signatures():
    # A stray character is refused, not skipped over (a lenient decoder would accept both).
    name, hash_text, key64 = PETER_VKEY.split("+")
    with pytest.raises(ValueError, match="not of the form"):
        Verifier.from_text(f"{name}+{hash_text}+{key64[:4]}!{key64[4:]}")
    with pytest.raises(NoteError, match="is not NAME BASE64"):
        open_note(PETER_NOTE + "\u2014 someone AAAA!AAAA\n", [Verifier.from_text(PETER_VKEY)])


def test_the_shortest_signature_of_an_unknown_key_is_listed():
    # Five bytes: the key hash and one byte of signature, the least Go's note.Open reads.
    line = "\u2014 someone AAAAAAA=\n"
    opened = open_note(PETER_NOTE + line, [Verifier.from_text(PETER_VKEY)])
    assert opened.unverified == (line.strip("\n"),)
    with pytest.raises(NoteError, match="is not NAME BASE64"):
        open_note(PETER_NOTE + "\u2014 someone AAAAAA==\n", [Verifier.from_text(PETER_VKEY)])


def test_a_refusal_names_the_algorithm_byte_and_quotes_long_lines_cut_short():
    name, hash_text, key64 = PETER_VKEY.split("+")
    other = base64.b64encode(b"\x02" + base64.b64decode(key64)[1:]).decode()
    with pytest.raises(ValueError, match="algorithm byte 0x02 is not Ed25519"):
        Verifier.from_text(f"{name}+{hash_text}+{other}")
    with pytest.raises(ValueError, match="'" + "x" * 60 + "': not of the form"):
        Verifier.from_text("x" * 100)
    long_line = "\u2014 " + "n" * 100 + " AAAA!AAAA"
    with pytest.raises(NoteError, match="signature line '" + long_line[:40] + "' is not"):
        open_note(PETER_NOTE + long_line + "\n", [Verifier.from_text(PETER_VKEY)])
    with pytest.raises(NoteError, match="signature line '" + "x" * 40 + "' does not start"):
        open_note(PETER_NOTE + "x" * 100 + "\n", [Verifier.from_text(PETER_VKEY)])
