"""Secrets by reference: read at call time, and never echoed, even when the secret itself was put
where its reference belongs."""

from __future__ import annotations

import pytest

from wingsmith.adapters.secrets import SecretUnavailable, describe_ref, read_secret_ref


def test_env_and_file_references(monkeypatch, tmp_path):
    monkeypatch.setenv("WINGSMITH_TEST_SECRET", "s3cret")
    assert read_secret_ref("WINGSMITH_TEST_SECRET") == read_secret_ref("env:WINGSMITH_TEST_SECRET") == "s3cret"
    (tmp_path / "s").write_text("from-file\n")
    assert read_secret_ref(f"file:{tmp_path / 's'}") == "from-file"


@pytest.mark.parametrize("ref", ["hf_AbCdEf0123456789TokenPastedByMistake", "https://hooks.example/T0/B1/xyz"])
def test_a_secret_given_as_its_own_reference_is_never_echoed(ref):
    with pytest.raises(SecretUnavailable) as err:
        read_secret_ref(ref, setting="WINGSMITH_REVIEW_WEBHOOK_REF")
    assert ref not in str(err.value) and "not hold the token itself" in str(err.value)
    assert ref not in describe_ref(ref)


def test_unset_and_empty_references_say_where_they_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("WINGSMITH_TEST_UNSET", raising=False)
    with pytest.raises(SecretUnavailable, match="env var WINGSMITH_TEST_UNSET named by the reference is not set"):
        read_secret_ref("WINGSMITH_TEST_UNSET")
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(SecretUnavailable, match="is empty"):
        read_secret_ref(f"file:{tmp_path / 'empty'}")
