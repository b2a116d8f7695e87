"""What the `kubernetes` client logs about credential plugins. A kubeconfig user with an `exec:`
plugin or an `auth-provider:` makes the client run a program and log what it prints; the loader
(wingsmith/adapters/kube/kubeconfig.py) refuses such users unless the plane operator trusts them by name, and
for those, whatever the client logs about a plugin (its stderr may print a token) is withheld.
"""

from __future__ import annotations

import logging
import os


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
