"""Optional encryption of workflow payloads (AES-256-GCM) for every client and worker.

Temporal stores inputs, results, update arguments and activity payloads as they are given to it;
with a key configured, the server (and anyone reading its database or the UI without the codec)
sees only ciphertext. Each encrypted payload names its key by a fingerprint in its metadata, so a
key can be rotated: encrypt with the current key, and still decrypt with the previous ones.

Keys are secrets by reference (`WINGSMITH_PAYLOAD_KEY_REF`, `WINGSMITH_PAYLOAD_OLD_KEY_REFS`): the
reference names an env var or a file holding 32 bytes as base64 or hex. No message here ever
contains key material.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import os
import re
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

from wingsmith.adapters.payloads import CodecChain, PayloadBudgetCodec
from wingsmith.adapters.secrets import SecretUnavailable, describe_ref, read_secret_ref
from wingsmith.domain.config import Settings

ENCODING = b"binary/encrypted"
KEY_ID_KEY = "encryption-key-id"
KEY_BYTES = 32
_NONCE_BYTES = 12
_TAG_BYTES = 16
_HEX = re.compile(r"[0-9a-fA-F]{64}")
_ALL_HEX = re.compile(r"[0-9a-fA-F]+")


class PayloadKeyError(ValueError):
    """A key that cannot be used, or a payload that no configured key opens."""


def parse_key(material: str, *, source: str = "the payload key") -> bytes:
    """32 raw bytes from base64 (standard or URL-safe, padding optional) or hex."""
    text = material.strip()
    if _HEX.fullmatch(text):
        return bytes.fromhex(text)
    if len(text) > 44 and _ALL_HEX.fullmatch(text):
        # Longer than any 32-byte base64 and only hex digits: a hex key of the wrong length.
        raise PayloadKeyError(f"{source} looks like hex with {len(text)} digits; AES-256 needs "
                              f"{2 * KEY_BYTES} (generate one with `openssl rand -hex 32`)")
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise PayloadKeyError(f"{source} is neither base64 nor hex; generate one with "
                              f"`openssl rand -base64 32`") from None
    if len(raw) != KEY_BYTES:
        raise PayloadKeyError(f"{source} must decode to {KEY_BYTES} bytes for AES-256, "
                              f"not {len(raw)}; generate one with `openssl rand -base64 32`")
    return raw


def key_id(key: bytes) -> str:
    """A fingerprint that names a key in payload metadata without revealing it; the domain prefix
    keeps it from matching a hash of the bare key computed anywhere else."""
    return "k1-" + hashlib.sha256(b"wingsmith-payload-key\0" + key).hexdigest()[:16]


class EncryptionCodec(PayloadCodec):
    """Encrypts every payload with the current key; decrypts with whichever configured key the
    payload names, and passes payloads that were never encrypted through unchanged (histories
    written before encryption was turned on stay readable)."""

    def __init__(self, key: bytes, old_keys: Sequence[bytes] = ()):
        for k in (key, *old_keys):
            if len(k) != KEY_BYTES:
                raise PayloadKeyError(f"payload keys must be {KEY_BYTES} bytes, not {len(k)}")
        self.key_id = key_id(key)
        self._encryptor = AESGCM(key)
        self._keys = {key_id(k): AESGCM(k) for k in (*old_keys, key)}

    @property
    def key_ids(self) -> list[str]:
        return list(self._keys)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(_NONCE_BYTES)
        # The key id is authenticated data: moving a payload under another id cannot go unnoticed.
        sealed = self._encryptor.encrypt(nonce, payload.SerializeToString(), self.key_id.encode())
        return Payload(metadata={"encoding": ENCODING, KEY_ID_KEY: self.key_id.encode()}, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        kid = payload.metadata.get(KEY_ID_KEY, b"").decode(errors="replace")
        aes = self._keys.get(kid)
        if aes is None:
            raise PayloadKeyError(
                f"payload was encrypted with key {kid or '(no key id)'}, which is not configured "
                f"(configured: {', '.join(self._keys)}); add its reference to WINGSMITH_PAYLOAD_OLD_KEY_REFS")
        data = payload.data
        if len(data) < _NONCE_BYTES + _TAG_BYTES:
            raise PayloadKeyError(f"payload under key {kid} is {len(data)} bytes, too short to be encrypted "
                                  f"(nonce and tag alone are {_NONCE_BYTES + _TAG_BYTES})")
        try:
            plain = aes.decrypt(data[:_NONCE_BYTES], data[_NONCE_BYTES:], kid.encode())
        except InvalidTag:
            raise PayloadKeyError(f"payload under key {kid} failed authentication: it was altered, or a "
                                  f"different key carries the same id") from None
        return Payload.FromString(plain)


def _load_key(ref: str, setting: str) -> bytes:
    try:
        material = read_secret_ref(ref, what="the payload key", setting=setting)
    except SecretUnavailable as exc:
        raise PayloadKeyError(str(exc)) from None
    return parse_key(material, source=f"the payload key in {describe_ref(ref)} ({setting})")


def codec_from_settings(settings: Settings) -> EncryptionCodec | None:
    """The configured codec, or None when payload encryption is off. Keys are read now, once."""
    if not settings.payload_key_ref:
        if settings.payload_old_key_refs:
            raise PayloadKeyError("WINGSMITH_PAYLOAD_OLD_KEY_REFS is set but WINGSMITH_PAYLOAD_KEY_REF is not: "
                                  "old keys only decrypt; set the current key too")
        return None
    key = _load_key(settings.payload_key_ref, "WINGSMITH_PAYLOAD_KEY_REF")
    old = [_load_key(ref, f"WINGSMITH_PAYLOAD_OLD_KEY_REFS item {i + 1}")
           for i, ref in enumerate(settings.payload_old_key_refs)]
    return EncryptionCodec(key, old)


def data_converter(settings: Settings) -> DataConverter:
    """pydantic payloads within the payload budget (wingsmith/adapters/payloads.py), encrypted when a payload
    key is configured."""
    codec = codec_from_settings(settings)
    budget = PayloadBudgetCodec()
    return dataclasses.replace(pydantic_data_converter,
                               payload_codec=CodecChain([budget, codec]) if codec is not None else budget)
