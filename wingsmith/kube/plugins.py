"""Kubeconfig users that run code. A user with an `exec:` credential plugin, or an `auth-provider:`,
makes the `kubernetes` client run a program (or a provider's refresh flow) with the process's
environment, and log what it prints. A kubeconfig is data an admin points the plane at, so it must
not become a way to run commands in the API or the worker: such users are refused unless the
operator names the command (or provider) in `WINGSMITH_KUBECONFIG_EXEC_ALLOW`.

And whatever the client logs about a plugin (its stderr may print a token) is withheld.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from pathlib import Path

import yaml

from wingsmith.kube.errors import KubeError

EXEC_ALLOW_ENV = "WINGSMITH_KUBECONFIG_EXEC_ALLOW"


def exec_allow_from_env() -> list[str]:
    """The operator's allow-list: comma-separated command base names or auth-provider names."""
    return [part.strip() for part in os.environ.get(EXEC_ALLOW_ENV, "").split(",") if part.strip()]


def check_credential_plugins(path: Path, context: str | None, allow: Collection[str]) -> None:
    """Refuse (KubeError `KubeconfigExecRefused`) when the context's user would run a program that
    is not on the allow-list. Reads the file as plain YAML; nothing in it is executed."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        # The parser's message can quote the file, credentials included: name only the type.
        raise KubeError("KubeconfigInvalid", f"kubeconfig {str(path)!r} could not be read ({type(exc).__name__})",
                        retryable=False) from None
    if not isinstance(config, dict):
        return  # not a kubeconfig at all; the client says so in its own words
    name = context or config.get("current-context")
    ctx = _named(config.get("contexts"), name).get("context") or {}
    user_name = ctx.get("user") if isinstance(ctx, dict) else None
    user = _named(config.get("users"), user_name).get("user") or {}
    if not isinstance(user, dict):
        return
    allowed = set(allow)
    if isinstance(user.get("exec"), dict):
        command = str(user["exec"].get("command") or "")
        if Path(command).name not in allowed:
            raise KubeError("KubeconfigExecRefused", (
                f"kubeconfig {str(path)!r} context {name!r}: user {user_name!r} has an exec credential plugin "
                f"({Path(command).name or 'no command'}), which would run a program; add its command name to "
                f"{EXEC_ALLOW_ENV} if you trust it, or use a token or client certificate"), retryable=False)
    if isinstance(user.get("auth-provider"), dict):
        provider = str(user["auth-provider"].get("name") or "")
        if provider not in allowed:
            raise KubeError("KubeconfigExecRefused", (
                f"kubeconfig {str(path)!r} context {name!r}: user {user_name!r} has an auth-provider "
                f"({provider or 'unnamed'}), which runs its own login flow; add {provider!r} to {EXEC_ALLOW_ENV} "
                "if you trust it, or use a token or client certificate"), retryable=False)


def _named(entries: object, name: object) -> dict:
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return {}


class WithholdPluginOutput(logging.Filter):
    """The kubernetes client logs a failed exec plugin's message, stderr included, on the root
    logger at ERROR. Keep the record (something failed) but not its words."""

    def filter(self, record: logging.LogRecord) -> bool:
        if f"kubernetes{os.sep}config{os.sep}" in record.pathname:
            record.msg = ("kubernetes client: a kubeconfig credential plugin reported an error; "
                          "its output is withheld because it may contain credentials")
            record.args = ()
        return True


def withhold_plugin_output() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, WithholdPluginOutput) for f in root.filters):
        root.addFilter(WithholdPluginOutput())
