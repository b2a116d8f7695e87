#!/usr/bin/env bash
# Kept for those who learned this name: the Debian packages the tests need, Chromium among them.
exec bash "$(dirname "$0")/install-debian.sh"
