"""Looking for secrets in exported text: the secret itself and the forms it takes when something
encodes it on the way (base64 at any alignment inside a larger blob, hex), and the payloads of a
Temporal history decoded from their JSON base64."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator


def secret_forms(secret: str | bytes) -> set[str]:
    """Substrings that betray `secret` however a blob around it was base64-encoded: for each of the
    three alignments, the base64 characters that depend only on the secret's own bytes."""
    raw = secret.encode() if isinstance(secret, str) else secret
    forms = {raw.decode(errors="ignore"), raw.hex()}
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * shift + raw).decode()
            start = (shift * 4 + 2) // 3 if shift else 0  # characters that mix in the leading bytes
            end = len(text) - 4  # the last group may mix in whatever follows
            if end - start >= 8:
                forms.add(text[start:end])
    return {f for f in forms if len(f) >= 8}


def find_secrets(text: str, secrets: dict[str, str | bytes]) -> dict[str, list[str]]:
    """Which named secrets appear in `text`, and as which form."""
    found: dict[str, list[str]] = {}
    for name, secret in secrets.items():
        hits = [form for form in secret_forms(secret) if form in text]
        if hits:
            found[name] = hits
    return found


def payload_texts(history: dict | list) -> Iterator[str]:
    """The decoded `data` of every payload in a history's protobuf JSON (payloads are base64 there)."""
    if isinstance(history, dict):
        if "metadata" in history and isinstance(history.get("data"), str):
            try:
                yield base64.b64decode(history["data"]).decode(errors="replace")
            except ValueError:
                pass
        for value in history.values():
            yield from payload_texts(value)
    elif isinstance(history, list):
        for value in history:
            yield from payload_texts(value)


def history_export(history_json: str) -> str:
    """A history's JSON plus its decoded payloads: what someone with the export could read."""
    return "\n".join([history_json, *payload_texts(json.loads(history_json))])
