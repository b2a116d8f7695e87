"""One Kubernetes client per kubeconfig and context, shared by the activities of a process: reused while
the file is unchanged, rebuilt when it changes, never closed by the activities that borrow it."""

from __future__ import annotations

import os
import shutil

import pytest

from activities.rollout import dgd_client_for
from wingsmith.adapters.kube import KubeconfigRef, KubeError, shared_api_client


def test_one_client_per_kubeconfig_and_context(sim, kubeconfig, tmp_path):
    first = shared_api_client(kubeconfig)
    assert shared_api_client(kubeconfig) is first
    other = KubeconfigRef(source=kubeconfig.source, context=sim.context("sim-west"))
    assert shared_api_client(other) is not first

    copy = tmp_path / "kubeconfig"
    shutil.copy(kubeconfig.source, copy)
    ref = KubeconfigRef(source=str(copy), context=kubeconfig.context)
    before = shared_api_client(ref)
    copy.write_text(copy.read_text() + "\n# rotated\n")  # a rotated credential: the file changes
    os.utime(copy, ns=(os.stat(copy).st_atime_ns, os.stat(copy).st_mtime_ns + 1_000_000))
    after = shared_api_client(ref)
    assert after is not before
    assert shared_api_client(ref) is after


def test_activities_borrow_the_shared_client_and_leave_it_open(sim, kubeconfig):
    with dgd_client_for(kubeconfig) as kube:
        assert kube.api is shared_api_client(kubeconfig)
        kube.core.list_namespace()
    # Still usable after the activity's `with` closed its DgdClient.
    assert shared_api_client(kubeconfig).call_api is not None
    with dgd_client_for(kubeconfig) as again:
        again.core.list_namespace()


def test_a_missing_kubeconfig_is_the_same_clear_error(tmp_path):
    with pytest.raises(KubeError) as err:
        shared_api_client(KubeconfigRef(source=str(tmp_path / "nope")))
    assert err.value.type == "KubeconfigMissing"
