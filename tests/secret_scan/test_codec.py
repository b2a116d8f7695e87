"""Payload encryption: the codec on its own (keys, key ids, rotation, tampering), then a workflow run
through a real Temporal dev server whose raw history holds only ciphertext while the codec's client
reads it, and the API's remote codec endpoint that the Temporal UI calls."""

from __future__ import annotations

import base64
import json
import os

import httpx
import pytest
import pytest_asyncio
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from api.app import create_app
from api.auth import TokenTable
from tests.conftest import unique_queue
from tests.secret_scan.echo_workflow import EchoIn, EchoOut, EchoWorkflow, describe
from tests.secret_scan.scan import history_export
from wingsmith.adapters.codec import (
    ENCODING,
    KEY_ID_KEY,
    EncryptionCodec,
    PayloadKeyError,
    codec_from_settings,
    data_converter,
    key_id,
    parse_key,
)
from wingsmith.adapters.payloads import PayloadBudgetCodec
from wingsmith.adapters.temporal import connect
from wingsmith.domain.config import Settings

KIMI = "moonshotai/Kimi-K3"
TOKENS = {"tok-vic": {"name": "vic", "roles": ["viewer"]}, "tok-olga": {"name": "olga", "roles": ["operator"]},
          "tok-rita": {"name": "rita", "roles": ["operator"], "team": "red"},
          "tok-root": {"name": "root", "roles": ["admin"], "team": "ops"}}
UI = "http://localhost:8233"


def _plain(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps({"model_id": text}).encode())


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("codec") / "payload.key"
    path.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    return path


# ---- keys ---------------------------------------------------------------------------------------

def test_keys_parse_from_base64_urlsafe_base64_and_hex():
    key = bytes(range(200, 232))
    assert parse_key(base64.b64encode(key).decode()) == key
    assert parse_key(base64.urlsafe_b64encode(key).decode().rstrip("=")) == key
    assert parse_key(key.hex()) == key
    assert parse_key(" " + key.hex().upper() + "\n") == key


@pytest.mark.parametrize("material, problem", [
    (base64.b64encode(b"k" * 16).decode(), "must decode to 32 bytes for AES-256, not 16"),
    ("ab" * 31, "looks like hex with 62 digits; AES-256 needs 64"),
    ("not a key at all!", "neither base64 nor hex"),
])
def test_a_bad_key_is_named_and_never_echoed(material, problem):
    with pytest.raises(PayloadKeyError) as err:
        parse_key(material, source="the payload key in the file /k")
    assert problem in str(err.value) and "the file /k" in str(err.value)
    assert material.strip() not in str(err.value)


def test_key_ids_are_stable_distinct_and_do_not_reveal_the_key():
    a, b = os.urandom(32), os.urandom(32)
    assert key_id(a) == key_id(a) != key_id(b)
    assert a.hex()[:16] not in key_id(a) and key_id(a).startswith("k1-")


def test_settings_name_where_a_key_is_missing(monkeypatch, key_file):
    monkeypatch.delenv("WINGSMITH_TEST_PAYLOAD_KEY", raising=False)
    assert codec_from_settings(Settings()) is None
    assert isinstance(data_converter(Settings()).payload_codec, PayloadBudgetCodec)  # unencrypted, still budgeted
    with pytest.raises(PayloadKeyError,
                       match="WINGSMITH_TEST_PAYLOAD_KEY named by WINGSMITH_PAYLOAD_KEY_REF is not set"):
        codec_from_settings(Settings(payload_key_ref="WINGSMITH_TEST_PAYLOAD_KEY"))
    with pytest.raises(PayloadKeyError, match="OLD_KEY_REFS is set but WINGSMITH_PAYLOAD_KEY_REF is not"):
        codec_from_settings(Settings(payload_old_key_refs=[f"file:{key_file}"]))
    with pytest.raises(PayloadKeyError, match="OLD_KEY_REFS item 1"):
        codec_from_settings(Settings(payload_key_ref=f"file:{key_file}", payload_old_key_refs=["NOPE_UNSET_KEY"]))
    monkeypatch.setenv("WINGSMITH_TEST_PAYLOAD_KEY", key_file.read_text())
    converter = data_converter(Settings(payload_key_ref="env:WINGSMITH_TEST_PAYLOAD_KEY"))
    assert converter.payload_converter_class is pydantic_data_converter.payload_converter_class
    budget, encryption = converter.payload_codec.codecs  # the budget sees the plain payload, then it is sealed
    assert isinstance(budget, PayloadBudgetCodec) and encryption.key_id == key_id(parse_key(key_file.read_text()))


def test_old_key_refs_read_comma_separated_from_the_environment(monkeypatch):
    monkeypatch.setenv("WINGSMITH_PAYLOAD_OLD_KEY_REFS", "OLD_ONE, file:/keys/older")
    assert Settings().payload_old_key_refs == ["OLD_ONE", "file:/keys/older"]


# ---- the codec ----------------------------------------------------------------------------------

async def test_round_trip_hides_data_and_encoding_and_names_the_key():
    codec = EncryptionCodec(os.urandom(32))
    original = [_plain(KIMI), Payload(metadata={"encoding": b"binary/null"})]
    sealed = await codec.encode(original)
    for payload in sealed:
        assert payload.metadata["encoding"] == ENCODING
        assert payload.metadata[KEY_ID_KEY].decode() == codec.key_id
        assert b"Kimi" not in payload.data and b"json/plain" not in payload.data
    assert sealed[0].data != (await codec.encode(original[:1]))[0].data  # a fresh nonce every time
    assert await codec.decode(sealed) == original


async def test_unencrypted_payloads_pass_through_decode():
    codec = EncryptionCodec(os.urandom(32))
    assert await codec.decode([_plain(KIMI)]) == [_plain(KIMI)]


async def test_the_wrong_key_is_a_clear_error():
    writer, reader = EncryptionCodec(os.urandom(32)), EncryptionCodec(os.urandom(32))
    sealed = await writer.encode([_plain(KIMI)])
    with pytest.raises(PayloadKeyError) as err:
        await reader.decode(sealed)
    assert f"encrypted with key {writer.key_id}, which is not configured" in str(err.value)
    assert reader.key_id in str(err.value) and "WINGSMITH_PAYLOAD_OLD_KEY_REFS" in str(err.value)


async def test_altered_ciphertext_or_a_moved_key_id_fails_authentication():
    key = os.urandom(32)
    codec = EncryptionCodec(key)
    sealed = (await codec.encode([_plain(KIMI)]))[0]
    flipped = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1]))
    with pytest.raises(PayloadKeyError, match="failed authentication"):
        await codec.decode([flipped])
    truncated = Payload(metadata=sealed.metadata, data=sealed.data[:20])
    with pytest.raises(PayloadKeyError, match="20 bytes, too short to be encrypted"):
        await codec.decode([truncated])
    other = EncryptionCodec(os.urandom(32), old_keys=[key])
    moved = Payload(metadata={**sealed.metadata, KEY_ID_KEY: other.key_id.encode()}, data=sealed.data)
    with pytest.raises(PayloadKeyError, match="failed authentication"):
        await other.decode([moved])


async def test_rotation_decrypts_with_the_old_key_and_encrypts_with_the_new():
    old_key, new_key = os.urandom(32), os.urandom(32)
    before = await EncryptionCodec(old_key).encode([_plain("written before rotation")])
    rotated = EncryptionCodec(new_key, old_keys=[old_key])
    assert await rotated.decode(before) == [_plain("written before rotation")]
    after = await rotated.encode([_plain("after")])
    assert after[0].metadata[KEY_ID_KEY].decode() == key_id(new_key) == rotated.key_id
    assert set(rotated.key_ids) == {key_id(old_key), key_id(new_key)}
    with pytest.raises(PayloadKeyError, match="not configured"):
        await EncryptionCodec(old_key).decode(after)


# ---- a real workflow ----------------------------------------------------------------------------

@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def encrypted_run(temporal_server, temporal_client, key_file):
    """EchoWorkflow run by a client and worker with the codec, connected the way every process is."""
    settings = Settings(temporal_namespace=temporal_client.namespace, payload_key_ref=f"file:{key_file}")
    client = await connect(settings, address=temporal_server.address)
    queue = unique_queue("codec")
    async with Worker(client, task_queue=queue, workflows=[EchoWorkflow], activities=[describe]):
        result = await client.execute_workflow(EchoWorkflow.run, EchoIn(model_id=KIMI),
                                               id=f"codec-{queue}", task_queue=queue)
    return settings, client, result, f"codec-{queue}"


async def test_history_holds_only_ciphertext_while_the_codec_client_reads_it(encrypted_run, temporal_client):
    settings, client, result, workflow_id = encrypted_run
    assert result == EchoOut(model_id=KIMI, note=f"described {KIMI}")

    # The same history through a client without the key: what the server and its database hold.
    raw = (await temporal_client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    exported = history_export(raw)
    assert "Kimi-K3" not in exported and base64.b64encode(KIMI.encode()).decode() not in raw
    key = client.data_converter.payload_codec.codecs[-1].key_id  # the budget, then the encryption
    payloads = _payloads_in(json.loads(raw))
    assert len(payloads) >= 4  # workflow input, activity input, activity result, workflow result
    for payload in payloads:
        assert base64.b64decode(payload["metadata"]["encoding"]) == ENCODING
        assert base64.b64decode(payload["metadata"][KEY_ID_KEY]).decode() == key

    # Control: the codec client decodes the very same history.
    decoded = await client.get_workflow_handle(workflow_id).fetch_history()
    events = [e for e in decoded.events if e.HasField("workflow_execution_started_event_attributes")]
    started = events[0].workflow_execution_started_event_attributes.input.payloads
    opened = await client.data_converter.payload_codec.decode(started)
    assert KIMI in opened[0].data.decode()


def _payloads_in(node) -> list[dict]:
    if isinstance(node, dict):
        own = [node] if "metadata" in node and "data" in node else []
        return own + [p for v in node.values() for p in _payloads_in(v)]
    if isinstance(node, list):
        return [p for v in node for p in _payloads_in(v)]
    return []


# ---- the API's remote codec ---------------------------------------------------------------------

@pytest_asyncio.fixture(loop_scope="session")
async def codec_api(key_file):
    def client_for(settings: Settings) -> httpx.AsyncClient:
        app = create_app(settings, tokens=TokenTable.from_json(json.dumps(TOKENS)))
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")
    return client_for


def _bearer(token: str, **more) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **more}


async def test_codec_endpoint_decodes_history_payloads_for_an_admin(encrypted_run, temporal_client, codec_api):
    settings, _client, _result, workflow_id = encrypted_run
    history = json.loads((await temporal_client.get_workflow_handle(workflow_id).fetch_history()).to_json())
    started = next(e for e in history["events"] if "workflowExecutionStartedEventAttributes" in e)
    body = {"payloads": started["workflowExecutionStartedEventAttributes"]["input"]["payloads"]}
    async with codec_api(settings) as api:
        r = await api.post("/codec/decode", json=body, headers=_bearer("tok-root", Origin=UI, **{"X-Namespace": "x"}))
        assert r.status_code == 200, r.text
        assert r.headers["access-control-allow-origin"] == UI
        [payload] = r.json()["payloads"]
        assert base64.b64decode(payload["metadata"]["encoding"]) == b"json/plain"
        assert json.loads(base64.b64decode(payload["data"])) == {"model_id": KIMI}

        refused = await api.post("/codec/decode", json=body, headers={"Origin": UI})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthenticated"
        assert refused.headers["access-control-allow-origin"] == UI  # the UI can read why
        assert (await api.post("/codec/decode", json=body, headers=_bearer("tok-nobody"))).status_code == 401


async def test_only_an_admin_may_decode_any_teams_payloads(encrypted_run, temporal_client, codec_api):
    """A payload names no team, and the UI's call names no workflow: decoding opens every team's
    payloads (workload specs, endpoint members, who asked), so only an admin may; a team's members
    read their own objects through the API and the console, which answer by team."""
    settings, _client, _result, workflow_id = encrypted_run
    history = json.loads((await temporal_client.get_workflow_handle(workflow_id).fetch_history()).to_json())
    started = next(e for e in history["events"] if "workflowExecutionStartedEventAttributes" in e)
    body = {"payloads": started["workflowExecutionStartedEventAttributes"]["input"]["payloads"]}
    async with codec_api(settings) as api:
        for token in ("tok-vic", "tok-olga", "tok-rita"):  # a viewer, an operator, another team's operator
            r = await api.post("/codec/decode", json=body, headers=_bearer(token, Origin=UI))
            assert r.status_code == 403, (token, r.text)
            assert r.json()["error"]["code"] == "forbidden" and "only an admin may" in r.json()["error"]["message"]
            assert r.headers["access-control-allow-origin"] == UI  # the UI can show why
            assert KIMI not in r.text
        assert (await api.post("/codec/decode", json=body, headers=_bearer("tok-root"))).status_code == 200


async def test_a_console_sign_in_lets_the_temporal_ui_decode_with_its_cookie(codec_api, key_file):
    # The Temporal UI with "include cross-origin credentials" sends the browser's cookies for /codec.
    from tests.console.conftest import sign_in
    settings = Settings(payload_key_ref=f"file:{key_file}")
    plain = {"payloads": [{"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                           "data": base64.b64encode(b'"hello"').decode()}]}
    async with codec_api(settings) as api:
        sealed = (await api.post("/codec/encode", json=plain, headers=_bearer("tok-olga"))).json()
        assert (await api.post("/codec/decode", json=sealed, headers={"Origin": UI})).status_code == 401
        await sign_in(api, "tok-vic")  # signed in, but not an admin
        assert (await api.post("/codec/decode", json=sealed, headers={"Origin": UI})).status_code == 403
        await sign_in(api, "tok-root")
        r = await api.post("/codec/decode", json=sealed, headers={"Origin": UI})
        assert r.status_code == 200 and r.json() == plain
        assert r.headers["access-control-allow-credentials"] == "true"


async def test_codec_endpoint_encodes_for_operators_only(codec_api, key_file):
    settings = Settings(payload_key_ref=f"file:{key_file}")
    plain = {"payloads": [{"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                           "data": base64.b64encode(b'"hello"').decode()}]}
    async with codec_api(settings) as api:
        assert (await api.post("/codec/encode", json=plain, headers=_bearer("tok-vic"))).status_code == 403
        r = await api.post("/codec/encode", json=plain, headers=_bearer("tok-olga"))
        assert r.status_code == 200
        sealed = r.json()
        assert base64.b64decode(sealed["payloads"][0]["metadata"]["encoding"]) == ENCODING
        back = await api.post("/codec/decode", json=sealed, headers=_bearer("tok-root"))
        assert back.json() == plain


async def test_cors_preflight_admits_only_the_temporal_ui(codec_api, key_file):
    async with codec_api(Settings(payload_key_ref=f"file:{key_file}", temporal_ui_url=UI + "/")) as api:
        ok = await api.options("/codec/decode", headers={
            "Origin": UI, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-namespace"})
        assert ok.status_code == 204
        assert ok.headers["access-control-allow-origin"] == UI
        assert {"authorization", "content-type", "x-namespace"} <= {
            h.strip() for h in ok.headers["access-control-allow-headers"].split(",")}
        assert "POST" in ok.headers["access-control-allow-methods"]
        other = await api.options("/codec/decode", headers={"Origin": "http://evil.example",
                                                            "Access-Control-Request-Method": "POST"})
        assert other.status_code == 403 and "access-control-allow-origin" not in other.headers
        assert "is not the Temporal UI (http://localhost:8233" in other.json()["error"]["message"]
        r = await api.post("/codec/decode", json={"payloads": []}, headers=_bearer("tok-root", Origin="http://evil.example"))
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


@pytest.mark.parametrize("body, problem", [
    (b"{not json", "body is not JSON"),
    (b'{"payload": []}', 'body must be {"payloads"'),
    (b'{"payloads": [{"datum": "aGk="}]}', "Temporal's JSON form"),
    (b'{"payloads": [{"metadata": []}]}', "Temporal's JSON form"),
])
async def test_bad_codec_requests_say_what_is_wrong(codec_api, key_file, body, problem):
    async with codec_api(Settings(payload_key_ref=f"file:{key_file}")) as api:
        r = await api.post("/codec/decode", content=body,
                           headers=_bearer("tok-root", **{"Content-Type": "application/json"}))
        assert r.status_code == 400 and problem in r.json()["error"]["message"]


async def test_payloads_under_an_unknown_key_are_refused_by_name(codec_api, key_file):
    stranger = EncryptionCodec(os.urandom(32))
    sealed = (await stranger.encode([_plain(KIMI)]))[0]
    body = {"payloads": [{"metadata": {k: base64.b64encode(v).decode() for k, v in sealed.metadata.items()},
                          "data": base64.b64encode(sealed.data).decode()}]}
    async with codec_api(Settings(payload_key_ref=f"file:{key_file}")) as api:
        r = await api.post("/codec/decode", json=body, headers=_bearer("tok-root"))
        assert r.status_code == 422 and stranger.key_id in r.json()["error"]["message"]


async def test_without_a_payload_key_the_codec_is_not_found(codec_api):
    async with codec_api(Settings()) as api:
        r = await api.post("/codec/decode", json={"payloads": []}, headers=_bearer("tok-root"))
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "codec_not_configured"
        assert "WINGSMITH_PAYLOAD_KEY_REF" in r.json()["error"]["message"]
        assert (await api.post("/codec/decode", json={"payloads": []})).status_code == 401
