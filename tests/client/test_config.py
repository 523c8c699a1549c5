"""Client settings: a bad one is one ``InvalidInputError`` that names where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.client import resolve_settings
from topoq.domain.errors import InvalidInputError


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def rejected(environ: dict[str, str], **options: str) -> str:
    with pytest.raises(InvalidInputError) as raised:
        resolve_settings(environ=environ, **options)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_a_relative_token_file_is_read_from_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("secret\n")
    settings = resolve_settings(environ={"TOPOQ_TOKEN_FILE": "token"})
    assert settings.token == "secret" and settings.token_source == "TOPOQ_TOKEN_FILE"


def test_a_relative_token_file_in_the_config_file_is_read_from_the_config_files_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "token").write_text("from-config")
    (tmp_path / "etc" / "config.yaml").write_text("token_file: token\n")
    settings = resolve_settings(environ={"TOPOQ_CONFIG": "etc/config.yaml"})
    assert settings.token == "from-config"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda path: None, "No such file or directory"),
        (lambda path: path.mkdir(), "is a directory, not a token file"),
        (lambda path: path.write_text("  \n"), "is empty"),
        (lambda path: path.write_bytes(b"\xff\xfe"), "not UTF-8 text"),
        (lambda path: path.write_text("two words"), "printable ASCII without spaces"),
    ],
    ids=["missing", "directory", "empty", "binary", "spaces"],
)
def test_a_token_file_that_holds_no_token_names_its_path(
    tmp_path: Path, make: object, expected: str
) -> None:
    make(tmp_path / "token")  # type: ignore[operator]  # a lambda of the table
    message = rejected({"TOPOQ_TOKEN_FILE": "token"})
    assert expected in message and str(tmp_path / "token") in message
    assert message.startswith("TOPOQ_TOKEN_FILE")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server: [http://x\n", "not valid YAML: expected ',' or ']'"),
        ("- server\n", "expected a mapping of server, token, token_file, found a list"),
        ("server: 8750\n", "server: must be a string, not 8750"),
        ("sever: http://x\n", "unknown key 'sever' (did you mean 'server'?)"),
        ("tokenfile: t\n", "did you mean 'token_file'?"),
        ("colour: red\n", "unknown key 'colour' (the keys are server, token, token_file)"),
    ],
)
def test_a_bad_config_file_says_what_is_wrong_and_where(
    tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / "config.yaml").write_text(text)
    message = rejected({"TOPOQ_CONFIG": "config.yaml"})
    assert expected in message and str(tmp_path / "config.yaml") in message


def test_a_config_file_named_by_topoq_config_must_be_there() -> None:
    assert "No such file or directory" in rejected({"TOPOQ_CONFIG": "missing.yaml"})


def test_no_config_file_in_home_is_no_config() -> None:
    assert resolve_settings(environ={}).server == "http://127.0.0.1:8750"


def test_an_empty_config_file_is_no_config(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("# nothing yet\n")
    assert resolve_settings(environ={"TOPOQ_CONFIG": "config.yaml"}).token is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("127.0.0.1:8750", "is not an http(s) URL with a host"),
        ("http://127.0.0.1:99999", "Port out of range"),
        ("http://127.0.0.1:port", "Port could not be cast"),
        ("http://[::1", "Invalid IPv6 URL"),
        ("ftp://server", "is not an http(s) URL"),
        ("http://127.0.0.1:0", "port 0"),
    ],
)
def test_a_bad_server_url_is_bad_input_naming_its_source(url: str, expected: str) -> None:
    message = rejected({"TOPOQ_SERVER": url})
    assert message.startswith("TOPOQ_SERVER: ") and expected in message
    assert "--server: " in rejected({}, server=url)


def test_a_server_url_loses_its_trailing_slash() -> None:
    assert resolve_settings(environ={"TOPOQ_SERVER": "https://q.example:443/"}).server == (
        "https://q.example:443"
    )


def test_a_token_that_cannot_be_a_header_is_bad_input() -> None:
    assert "printable ASCII" in rejected({"TOPOQ_TOKEN": "tökén"})
