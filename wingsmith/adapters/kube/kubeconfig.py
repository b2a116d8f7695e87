"""The plane's own kubeconfig loader: a reference in, a checked client configuration out.

A cluster's kubeconfig is named by reference, never by a path the `kubernetes` client opens itself
(the client splits `config_file` on ':' like KUBECONFIG, so a checked path and a loaded path could
differ). The references:

- `file:<absolute path>` (a bare absolute path is shorthand for it, for setups that predate these
  references): a file inside the plane's kubeconfig directory (WINGSMITH_KUBECONFIG_DIR, default
  $WINGSMITH_HOME/kubeconfigs), symlinks resolved before the containment check;
- `env:KUBECONFIG_<NAME>`: the variable holds the kubeconfig's content, read where the worker runs.
  Only names starting with `KUBECONFIG_`, so a request cannot make the worker parse any other
  variable of its environment (tokens, DATABASE_URL) as a kubeconfig;
- `secret:<namespace>/<name>[#<key>]`: a Kubernetes Secret read by the worker with its own service
  account (key default `kubeconfig`), for planes that run in a cluster.

The content is read once, bounded in bytes, measured in YAML nodes and depth before anything is built
from it (wingsmith/domain/bounded_yaml.py: 1 MiB of small mappings cost 8-18 s to parse, anchors can stand for
a billion nodes), parsed by the safe loader, checked, and handed to the client as a dict. It is CPU
work: the API runs it in a child process (wingsmith/adapters/kube/kubeconfig_check.py), never on its event loop;
the worker in its activity threads.
Refused, never echoing the content: a path list, a relative path or '..', a file outside the
directory, a user that runs a program (`exec`, `auth-provider`) unless the operator's own environment
allows it by name (WINGSMITH_KUBECONFIG_EXEC_ALLOW; nothing a request sends can), and file references
inside the kubeconfig (`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`)
outside the directory.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from wingsmith.adapters.kube.kube_error import KubeError
from wingsmith.domain.bounded_yaml import YamlLimits, YamlRefused, load

MAX_KUBECONFIG_BYTES = 1 << 20
# A kubeconfig, even a large fleet's, is small in structure: an entry per cluster, context and user is
# 30-50 YAML nodes (an exec plugin with its arguments included), so 50,000 nodes hold 1,000+ clusters,
# more than the byte limit holds once each cluster carries its CA certificate (~450 with a 2 KB one).
# The deepest real path is 8 levels (users[].user.exec.env[].value); 32 leaves room for extensions.
# Refusing a document past these costs ~0.2 s of CPU at most (the count stops at the limit); one just
# within them parses in ~0.7 s. docs/configuration.md ("Security limits") states them.
MAX_KUBECONFIG_NODES = 50_000
MAX_KUBECONFIG_DEPTH = 32
ENV_PREFIX = "KUBECONFIG_"
DEFAULT_SECRET_KEY = "kubeconfig"
_ENV_NAME = re.compile(rf"{ENV_PREFIX}[A-Z0-9_]+")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
# Where a kubeconfig names files of its own: (section, key).
_FILE_KEYS = (("cluster", "certificate-authority"), ("user", "client-certificate"), ("user", "client-key"),
              ("user", "tokenFile"))
_SHAPE = "file:<absolute path>, env:KUBECONFIG_<NAME> or secret:<namespace>/<name>[#<key>]"


def refused(kind: str, message: str) -> KubeError:
    return KubeError(kind, message, retryable=False)


class KubeconfigBeyondLimit(KubeError):
    """A kubeconfig past one of the loader's limits: `limit` names it (max_bytes, max_nodes, max_depth,
    max_number_chars, recursive_alias), `bound` is its value."""

    def __init__(self, message: str, *, limit: str, bound: int | None):
        super().__init__("KubeconfigTooLarge" if limit == "max_bytes" else "KubeconfigTooComplex", message,
                         retryable=False)
        self.limit, self.bound = limit, bound


@dataclass(frozen=True)
class KubeconfigSource:
    """A parsed reference. `text()` is its one canonical spelling (what the registry stores)."""

    kind: Literal["file", "env", "secret"]
    path: Path | None = None
    env: str = ""
    namespace: str = ""
    name: str = ""
    key: str = DEFAULT_SECRET_KEY

    def text(self) -> str:
        if self.kind == "file":
            return f"file:{self.path}"
        if self.kind == "env":
            return f"env:{self.env}"
        key = "" if self.key == DEFAULT_SECRET_KEY else f"#{self.key}"
        return f"secret:{self.namespace}/{self.name}{key}"


def parse_source(ref: str) -> KubeconfigSource:
    """The reference's syntax only (no file system, no environment): what the API checks always."""
    if ref.startswith("env:"):
        name = ref[4:]
        if not _ENV_NAME.fullmatch(name):
            raise refused("KubeconfigReferenceInvalid", "env: must name a variable KUBECONFIG_<NAME> (upper-case "
                                                        "letters, digits, '_') that holds the kubeconfig's content")
        return KubeconfigSource("env", env=name)
    if ref.startswith("secret:"):
        where, _, key = ref[7:].partition("#")
        namespace, _, name = where.partition("/")
        if not (_DNS_LABEL.fullmatch(namespace) and _DNS_SUBDOMAIN.fullmatch(name)
                and (not key or _SECRET_KEY.fullmatch(key))):
            raise refused("KubeconfigReferenceInvalid",
                          "secret: must be secret:<namespace>/<name>[#<key>] with Kubernetes names")
        return KubeconfigSource("secret", namespace=namespace, name=name, key=key or DEFAULT_SECRET_KEY)
    text = ref[5:] if ref.startswith("file:") else ref
    if not text.startswith("/"):
        if ref.startswith("file:"):
            raise refused("KubeconfigPathNotAbsolute", "a kubeconfig file must be given by its absolute path")
        raise refused("KubeconfigReferenceInvalid", f"kubeconfig must be a reference: {_SHAPE}")
    if ":" in text or os.pathsep in text or "," in text:
        raise refused("KubeconfigPathList", "a kubeconfig reference names one file; a path list "
                                            "(':' between paths, as in KUBECONFIG) is refused")
    if ".." in text.split("/"):
        raise refused("KubeconfigPathNotAbsolute", "a kubeconfig path may not contain '..'")
    return KubeconfigSource("file", path=Path(os.path.normpath(text)))


def canonical(ref: str) -> str:
    """One spelling per reference (a bare path becomes file:<path>); a reference that does not parse is
    kept as it is, so a row stored before these rules still reads back (the loader refuses it)."""
    try:
        return parse_source(ref).text()
    except KubeError:
        return ref


def describe(source: KubeconfigSource) -> str:
    """How messages name a source: where it is, never what it holds."""
    if source.kind == "file":
        return f"kubeconfig file {str(source.path)!r}"
    if source.kind == "env":
        return f"kubeconfig in env var {source.env}"
    return f"kubeconfig in Secret {source.namespace}/{source.name} key {source.key!r}"


class SecretReader(Protocol):
    """Reads one key of a Kubernetes Secret (decoded bytes); raises KubeError when it cannot."""

    def read(self, namespace: str, name: str, key: str) -> bytes: ...


class KubeSecrets:
    """Secrets through a Kubernetes API client: in a plane that runs in a cluster, the worker's own
    service account (`in_cluster()`), whose RBAC decides which Secrets it may read."""

    def __init__(self, api: Any):
        self.api = api

    @classmethod
    def in_cluster(cls) -> KubeSecrets:
        from kubernetes import client as k8s
        from kubernetes import config as k8s_config
        from kubernetes.config.config_exception import ConfigException
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException:
            raise refused("KubeconfigSecretUnavailable", "secret: references are read with the worker's "
                          "service account, and this worker does not run in a Kubernetes pod") from None
        return cls(k8s.ApiClient(configuration=configuration))

    def read(self, namespace: str, name: str, key: str) -> bytes:
        from kubernetes import client as k8s

        from wingsmith.adapters.kube.errors import classify
        try:
            secret = k8s.CoreV1Api(self.api).read_namespaced_secret(name, namespace)
        except Exception as exc:  # noqa: BLE001 - classify re-raises what it does not know
            raise classify(exc, doing=f"reading Secret {namespace}/{name}") from None
        encoded = (secret.data or {}).get(key)
        if encoded is None:
            raise refused("KubeconfigMissing", f"Secret {namespace}/{name} has no key {key!r}")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise refused("KubeconfigInvalid", f"Secret {namespace}/{name} key {key!r} is not base64") from None


@dataclass(frozen=True)
class KubeconfigPolicy:
    """What the plane operator allows: the directory kubeconfig files (and files they name) live in,
    and the credential plugins trusted by name. From the operator's settings only."""

    directory: Path
    exec_allow: frozenset[str] = frozenset()
    max_bytes: int = MAX_KUBECONFIG_BYTES
    max_nodes: int = MAX_KUBECONFIG_NODES
    max_depth: int = MAX_KUBECONFIG_DEPTH

    @classmethod
    def from_settings(cls, settings: Any = None) -> KubeconfigPolicy:
        if settings is None:
            from wingsmith.domain.config import Settings
            settings = Settings()
        return cls(directory=settings.kubeconfig_directory, exec_allow=frozenset(settings.kubeconfig_exec_allow))

    def contained(self, path: Path, what: str) -> Path:
        """`path` with symlinks resolved, refused when that is not inside the directory."""
        root = self.directory.resolve()
        try:
            real = path.resolve()
        except (OSError, ValueError):  # a NUL byte in a path a kubeconfig names, a symlink loop
            raise refused("KubeconfigInvalid", f"{what} is not a usable path") from None
        if not real.is_relative_to(root):
            raise refused("KubeconfigOutsideDirectory", f"{what} {str(path)!r} is outside the kubeconfig directory "
                          f"{str(root)!r} (WINGSMITH_KUBECONFIG_DIR); put it there or use env: or secret:")
        return real


def check_reference(ref: str, policy: KubeconfigPolicy) -> KubeconfigSource:
    """Syntax and, for files, the containment check (lexical when the file is not on this machine)."""
    source = parse_source(ref)
    if source.kind == "file":
        assert source.path is not None
        policy.contained(source.path, "kubeconfig file")
    return source


def read_source(source: KubeconfigSource, policy: KubeconfigPolicy, secrets: SecretReader | None = None) -> bytes:
    """The referenced content, at most `policy.max_bytes`."""
    if source.kind == "file":
        assert source.path is not None
        real = policy.contained(source.path, "kubeconfig file")
        try:
            if not real.exists():
                raise refused("KubeconfigMissing", f"{describe(source)} does not exist")
            if not real.is_file():  # a FIFO or a device would block or never end
                raise refused("KubeconfigInvalid", f"{describe(source)} is not a regular file")
            with open(real, "rb") as fh:
                content = fh.read(policy.max_bytes + 1)
        except OSError as exc:
            raise refused("KubeconfigInvalid", f"{describe(source)} could not be read ({exc.strerror})") from None
    elif source.kind == "env":
        value = os.environ.get(source.env)
        if not value:
            raise refused("KubeconfigMissing", f"env var {source.env} is not set where this process runs")
        content = value.encode()
    else:
        content = (secrets or KubeSecrets.in_cluster()).read(source.namespace, source.name, source.key)
    if len(content) > policy.max_bytes:
        raise KubeconfigBeyondLimit(f"{describe(source)} is over {policy.max_bytes} bytes", limit="max_bytes",
                                    bound=policy.max_bytes)
    return content


def parse_content(content: bytes, source: KubeconfigSource, policy: KubeconfigPolicy) -> dict[str, Any]:
    """The content as a dict, within the policy's limits. CPU-bound (up to ~0.7 s within the limits):
    call it from a thread when an event loop is waiting."""
    try:
        config = load(content, YamlLimits(max_bytes=policy.max_bytes, max_nodes=policy.max_nodes,
                                          max_depth=policy.max_depth))
    except YamlRefused as exc:
        # Messages name the limit or the parser's error type, never the text (it holds credentials).
        if exc.limit is not None:
            raise KubeconfigBeyondLimit(f"{describe(source)} {exc.message}; a kubeconfig holds far less, even a "
                                        "large fleet's (docs/configuration.md, Security limits)",
                                        limit=exc.limit, bound=exc.bound) from None
        raise refused("KubeconfigInvalid", f"{describe(source)} {exc.message}") from None
    if not isinstance(config, dict):
        raise refused("KubeconfigInvalid", f"{describe(source)} is not a kubeconfig (not a mapping)")
    return config


def check_config(config: dict[str, Any], context: str | None, policy: KubeconfigPolicy,
                 source: KubeconfigSource) -> str:
    """Refuse what would run a program or open a file outside the directory, for the context the
    client will use; returns that context's name."""
    where = describe(source)
    name = context or config.get("current-context")
    ctx = _named(config.get("contexts"), name).get("context")
    if not name or not isinstance(ctx, dict):
        raise refused("KubeconfigInvalid", f"{where} has no context {name!r}" if name else
                      f"{where} names no context and has no current-context")
    sections = {"cluster": _named(config.get("clusters"), ctx.get("cluster")).get("cluster"),
                "user": _named(config.get("users"), ctx.get("user")).get("user")}
    user = sections["user"]
    if isinstance(user, dict):
        for field, label in (("exec", "an exec credential plugin"), ("auth-provider", "an auth-provider")):
            plugin = user.get(field)
            if plugin is None:
                continue
            program = _program(field, plugin)
            if program not in policy.exec_allow:
                raise refused("KubeconfigExecRefused", (
                    f"{where} context {name!r}: user {ctx.get('user')!r} has {label} ({program or 'unnamed'}), which "
                    "would run a program in the plane; use a token or client certificate (the plane operator may "
                    "trust a plugin by name in the worker's WINGSMITH_KUBECONFIG_EXEC_ALLOW)"))
    for section, key in _FILE_KEYS:
        entry = sections[section]
        value = entry.get(key) if isinstance(entry, dict) else None
        if value is None:
            continue
        path = Path(str(value))
        if not path.is_absolute() or ".." in path.parts:
            raise refused("KubeconfigFileReference", f"{where} context {name!r}: {key} must be an absolute path "
                                                     f"inside the kubeconfig directory, or use {key}-data inline"
                          if key != "tokenFile" else
                          f"{where} context {name!r}: tokenFile must be an absolute path inside the kubeconfig "
                          "directory, or use token inline")
        try:
            policy.contained(path, f"{where} context {name!r}: {key}")
        except KubeError as exc:
            raise refused("KubeconfigFileReference", exc.message) from None
    return str(name)


def _program(field: str, plugin: object) -> str:
    if not isinstance(plugin, dict):
        return ""
    if field == "exec":
        return Path(str(plugin.get("command") or "")).name
    return str(plugin.get("name") or "")


def _named(entries: object, name: object) -> dict:
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return {}


def load_kubeconfig(ref: str, context: str | None, policy: KubeconfigPolicy,
                    secrets: SecretReader | None = None) -> tuple[dict[str, Any], str]:
    """Read, parse and check: the kubeconfig as a dict and the context to use. Nothing here runs or
    opens anything the checks did not allow."""
    source = check_reference(ref, policy)
    config = parse_content(read_source(source, policy, secrets), source, policy)
    return config, check_config(config, context, policy, source)


def fingerprint(ref: str) -> object:
    """What changes when the referenced content may have changed, cheaply (a stat, a hash of the
    variable); None when only time tells (a Secret)."""
    try:
        source = parse_source(ref)
    except KubeError:
        return None
    if source.kind == "file":
        assert source.path is not None
        try:
            stat = source.path.stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    if source.kind == "env":
        return hashlib.sha256(os.environ.get(source.env, "").encode()).hexdigest()
    return None

