import pytest

from wingsmith.domain.hub import InvalidSource, ModelSource, parse_source

VALID = [
    ("hf:moonshotai/Kimi-K3", "moonshotai/Kimi-K3", "main", False, "hf"),
    ("hf:moonshotai/Kimi-K3@main", "moonshotai/Kimi-K3", "main", True, "hf"),
    ("HF:Qwen/Qwen3-8B@v1.0", "Qwen/Qwen3-8B", "v1.0", True, "hf"),
    ("hf:deepseek-ai/DeepSeek-V3@" + "a" * 40, "deepseek-ai/DeepSeek-V3", "a" * 40, True, "hf"),
    ("  openai/gpt-oss-120b ", "openai/gpt-oss-120b", "main", False, "bare"),
    ("meta-llama/Llama-3.1-8B@refs/pr/12", "meta-llama/Llama-3.1-8B", "refs/pr/12", True, "bare"),
    ("https://huggingface.co/moonshotai/Kimi-K3", "moonshotai/Kimi-K3", "main", False, "url"),
    ("https://huggingface.co/moonshotai/Kimi-K3/", "moonshotai/Kimi-K3", "main", False, "url"),
    ("https://huggingface.co/Qwen/Qwen3-8B/tree/dev", "Qwen/Qwen3-8B", "dev", True, "url"),
    ("https://huggingface.co/Qwen/Qwen3-8B/tree/refs%2Fpr%2F3", "Qwen/Qwen3-8B", "refs/pr/3", True, "url"),
    ("https://hf.co/openai/gpt-oss-20b", "openai/gpt-oss-20b", "main", False, "url"),
]


@pytest.mark.parametrize("text,repo,rev,given,form", VALID)
def test_valid_sources(text, repo, rev, given, form):
    src = parse_source(text)
    assert (src.repo_id, src.revision, src.revision_given, src.form) == (repo, rev, given, form)


INVALID = [
    ("", "empty"),
    ("   ", "empty"),
    ("hf:Kimi-K3", "<org>/<name>"),
    ("gpt2", "<org>/<name>"),
    ("hf:a/b/c", "3 parts"),
    ("hf:/Kimi-K3", "organisation is empty"),
    ("hf:moonshotai/", "model name is empty"),
    ("hf:moonshotai/Kimi-K3@", "names no revision"),
    ("hf:moonshotai/Kimi K3", "'Kimi K3' is not a valid Hub name"),
    ("hf:moon--shot/x", "'moon--shot'"),
    ("hf:-org/x", "'-org'"),
    ("hf:org/x@bad..rev", "revision 'bad..rev'"),
    ("hf:org/x@rev with space", "revision"),
    ("s3://bucket/model", "unknown source scheme 's3'"),
    ("https://github.com/org/name", "'github.com' is not the Hugging Face Hub"),
    ("https://huggingface.co/datasets/org/name", "is a dataset, not a model"),
    ("https://huggingface.co/org", "names no <org>/<name>"),
    ("https://huggingface.co/org/name/blob/main/config.json", "unsupported Hub URL path /blob/main/config.json"),
    ("https://huggingface.co/org/name?x=1", "query or fragment"),
]


@pytest.mark.parametrize("text,problem", INVALID)
def test_invalid_sources_say_what_is_wrong(text, problem):
    with pytest.raises(InvalidSource) as err:
        parse_source(text)
    assert problem in str(err.value)
    assert isinstance(err.value, ValueError)


def test_pinned_and_display():
    assert parse_source("hf:a/b@" + "0" * 40).pinned
    assert not parse_source("hf:a/b@main").pinned
    assert str(parse_source("a/b")) == "hf:a/b"
    assert str(parse_source("hf:a/b@dev")) == "hf:a/b@dev"
    assert isinstance(parse_source("a/b"), ModelSource)


def test_a_source_is_parsed_once_and_long_ones_each_time():
    assert parse_source("hf:openai/gpt-oss-20b") is parse_source("  hf:openai/gpt-oss-20b ")
    long = "https://huggingface.co/openai" + "/" * 600 + "gpt-oss-20b"  # valid, and past the memo
    assert parse_source(long) == parse_source(long) and parse_source(long) is not parse_source(long)
    assert parse_source(long).repo_id == "openai/gpt-oss-20b"
    for _ in range(2):  # a refusal is not remembered as an answer
        with pytest.raises(InvalidSource):
            parse_source("hf:Kimi-K3")
