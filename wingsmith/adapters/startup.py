"""How a process says it cannot start: one line on stderr naming what it tried to reach and why, and
an exit code that tells a supervisor (Kubernetes, `wingsmith up`) whether starting again can help.
A traceback or a silent retry loop helps nobody who set a wrong certificate or DSN."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from pydantic import AliasChoices, ValidationError

from wingsmith.domain.config import Settings, get_settings

T = TypeVar("T")

# sysexits.h: EX_CONFIG (a restart cannot help until someone fixes the configuration) and
# EX_UNAVAILABLE (the service may come back: restart with back-off).
EXIT_MISCONFIGURED = 78
EXIT_UNAVAILABLE = 69


class StartFailure(Exception):
    """`str(exc)` is the whole line: what was tried (an address, never a DSN or key) and the cause."""

    def __init__(self, line: str, *, misconfigured: bool) -> None:
        super().__init__(" ".join(line.split()))  # one line, whatever the cause's text held
        self.misconfigured = misconfigured

    @property
    def exit_code(self) -> int:
        return EXIT_MISCONFIGURED if self.misconfigured else EXIT_UNAVAILABLE


def exit_on_start_failure(process: str, failure: StartFailure) -> NoReturn:
    print(f"{process}: {failure}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    # A Temporal client may abort the interpreter at exit (PITFALLS.md); the line above is the message.
    os._exit(failure.exit_code)


def run_or_exit(process: str, main: Callable[[], T]) -> T:
    """Run a process's main; a StartFailure ends it in one line (see `exit_on_start_failure`)."""
    try:
        return main()
    except StartFailure as failure:
        exit_on_start_failure(process, failure)


def _setting_names(loc: tuple[int | str, ...]) -> str:
    """The environment variable(s) a person sets for the setting pydantic names (its field name)."""
    if not loc:
        return ""
    field = str(loc[0])
    info = Settings.model_fields.get(field)
    if info is None:  # pydantic names a setting read through one of its aliases by that alias
        return field.upper()
    if isinstance(info.validation_alias, AliasChoices):
        return " or ".join(str(name) for name in info.validation_alias.choices)
    return f"{Settings.model_config.get('env_prefix', '')}{field}".upper()


def settings_failure(exc: ValidationError) -> StartFailure:
    """Every setting that does not parse, by the variable a person sets, in pydantic's words: never the
    value (it may be a DSN with its password), and no traceback (a restart cannot fix it)."""
    problems = []
    for error in exc.errors():
        names = _setting_names(error["loc"])
        words = error["msg"].removeprefix("Value error, ")
        problems.append(f"{names}: {words}" if names else words)
    return StartFailure(f"bad configuration: {'; '.join(problems)}", misconfigured=True)


def load_settings() -> Settings:
    """The process's settings, or a StartFailure saying which setting is wrong (for `run_or_exit`)."""
    try:
        return get_settings()
    except ValidationError as exc:
        raise settings_failure(exc) from None


def postgres_failure(exc: BaseException) -> StartFailure:
    """asyncpg's own words, which name host and port but never the DSN's password. Settings it parses
    from DATABASE_URL (sslmode, sslrootcert, …) fail the same way every time: those are misconfigured."""
    import asyncpg
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    ssl_refused = isinstance(exc, ConnectionError) and "rejected SSL upgrade" in text
    misconfigured = ssl_refused or isinstance(exc, (asyncpg.ClientConfigurationError, asyncpg.InvalidPasswordError,
                                                    asyncpg.InvalidAuthorizationSpecificationError,
                                                    asyncpg.InvalidCatalogNameError, FileNotFoundError,
                                                    PermissionError, IsADirectoryError))
    if ssl_refused:
        text += " (DATABASE_URL asks for TLS with sslmode=require or stricter; the server offers none)"
    elif isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
        text = f"a file DATABASE_URL names (sslrootcert, sslcert, sslkey, passfile): {exc.strerror or text}"
    return StartFailure(f"cannot connect to Postgres (DATABASE_URL): {text}", misconfigured=misconfigured)
