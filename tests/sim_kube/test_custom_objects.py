"""Custom-object semantics through the real `kubernetes` client: CRUD, generation, resourceVersion,
server-side apply, schema validation and the status subresource."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from tests.sim_kube.kit import GROUP, PLURAL, VERSION, apply, dgd, get, replace, wait_for


def _status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_create_get_list_replace_patch_delete(custom, namespace):
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, dgd("alpha"))
    meta = created["metadata"]
    assert meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"]
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                           dgd("beta", labels={"team": "b", "app": "beta"}))

    listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["alpha", "beta"]
    assert listed["kind"] == "DynamoGraphDeploymentList"
    selected = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="team=b")
    assert [o["metadata"]["name"] for o in selected["items"]] == ["beta"]
    either = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="team in (x,b),app")
    assert either["items"][0]["metadata"]["name"] == "beta"
    assert custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="!team")["items"][0][
        "metadata"]["name"] == "alpha"

    replaced = replace(custom, namespace, "alpha", lambda o: o["spec"]["components"][1].__setitem__("replicas", 2))
    assert replaced["metadata"]["generation"] == 2

    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "alpha",
                                                    {"metadata": {"labels": {"x": "y"}}})
    assert patched["metadata"]["labels"]["x"] == "y"
    assert patched["metadata"]["generation"] == 2  # metadata-only change

    # The operator's finalizer makes deletion asynchronous, as on a real cluster: a second delete
    # while terminating succeeds, and once the object is gone a delete is 404.
    first = custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "beta")
    if first["metadata"].get("finalizers"):
        assert first["metadata"]["deletionTimestamp"]
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "beta")
        except ApiException as exc:  # the operator may already have let it go
            assert exc.status == 404
    wait_for(lambda: not custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                              field_selector="metadata.name=beta")["items"],
             what="beta to be gone")
    with pytest.raises(ApiException) as err:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "beta")
    assert err.value.status == 404
    assert _status_of(err.value)["reason"] == "NotFound"


def test_create_twice_is_already_exists(custom, namespace):
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, dgd("dup"))
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, dgd("dup"))
    assert err.value.status == 409
    status = _status_of(err.value)
    assert status["kind"] == "Status" and status["reason"] == "AlreadyExists"
    assert status["message"] == 'dynamographdeployments.nvidia.com "dup" already exists'


def test_missing_object_and_namespace_are_404(custom, namespace):
    with pytest.raises(ApiException) as err:
        get(custom, namespace, "nope")
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, "no-such-namespace", PLURAL, dgd("x"))
    assert err.value.status == 404
    assert _status_of(err.value)["message"] == 'namespaces "no-such-namespace" not found'


def test_server_side_apply_twice_keeps_generation_and_resource_version(custom, namespace):
    apply(custom, namespace, dgd("ssa"))
    first = get(custom, namespace, "ssa")
    apply(custom, namespace, dgd("ssa"))
    second = get(custom, namespace, "ssa")
    assert first["metadata"]["generation"] == second["metadata"]["generation"] == 1
    assert first["metadata"]["uid"] == second["metadata"]["uid"]
    managers = {(m["manager"], m["operation"]) for m in second["metadata"]["managedFields"]}
    assert ("wingsmith", "Apply") in managers
    assert len(custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]) == 1


def test_server_side_apply_spec_change_bumps_generation_label_change_does_not(custom, namespace):
    apply(custom, namespace, dgd("gen"))
    apply(custom, namespace, dgd("gen", replicas=2))
    assert get(custom, namespace, "gen")["metadata"]["generation"] == 2
    apply(custom, namespace, dgd("gen", replicas=2, labels={"app": "gen", "extra": "1"}))
    obj = get(custom, namespace, "gen")
    assert obj["metadata"]["generation"] == 2 and obj["metadata"]["labels"]["extra"] == "1"


def test_server_side_apply_removes_fields_it_no_longer_sets(custom, namespace):
    body = dgd("drop")
    body["spec"]["priorityClassName"] = "high"
    apply(custom, namespace, body)
    assert get(custom, namespace, "drop")["spec"]["priorityClassName"] == "high"
    apply(custom, namespace, dgd("drop"))
    obj = get(custom, namespace, "drop")
    assert "priorityClassName" not in obj["spec"] and obj["metadata"]["generation"] == 2


def test_server_side_apply_conflict_without_force(custom, namespace):
    apply(custom, namespace, dgd("owned"))
    other = dgd("owned")
    other["spec"]["backendFramework"] = "sglang"
    with pytest.raises(ApiException) as err:
        apply(custom, namespace, other, manager="someone-else", force=False)
    assert err.value.status == 409
    status = _status_of(err.value)
    assert status["reason"] == "Conflict" and ".spec.backendFramework" in status["message"]
    apply(custom, namespace, other, manager="someone-else", force=True)
    assert get(custom, namespace, "owned")["spec"]["backendFramework"] == "sglang"


def test_server_side_apply_requires_field_manager(custom, namespace):
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "nofm", dgd("nofm"),
                                              _content_type="application/apply-patch+yaml")
    assert err.value.status == 400


def test_stale_resource_version_is_conflict(custom, namespace):
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, dgd("stale"))
    old = get(custom, namespace, "stale")
    replace(custom, namespace, "stale", lambda o: o["spec"]["components"][1].__setitem__("replicas", 3))
    old["spec"]["components"][1]["replicas"] = 4
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "stale", old)
    assert err.value.status == 409
    assert "the object has been modified" in _status_of(err.value)["message"]
    del old["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "stale", old)
    assert err.value.status == 422 and "metadata.resourceVersion" in err.value.body


@pytest.mark.parametrize(("mutate", "field", "words"), [
    (lambda b: b["spec"]["components"][1].__setitem__("replicas", "two"), "spec.components[1].replicas",
     "must be of type integer"),
    (lambda b: b["spec"]["components"][0].__setitem__("type", "boss"), "spec.components[0].type", "Unsupported value"),
    (lambda b: b["spec"]["components"][1].pop("name"), "spec.components[1].name", "Required value"),
    (lambda b: b["spec"]["components"][1].__setitem__("replicas", -1), "spec.components[1].replicas",
     "greater than or equal to 0"),
])
def test_schema_invalid_dgd_is_422_naming_the_field(custom, namespace, mutate, field, words):
    body = dgd("bad")
    mutate(body)
    with pytest.raises(ApiException) as err:
        apply(custom, namespace, body)
    assert err.value.status == 422
    status = _status_of(err.value)
    assert status["reason"] == "Invalid"
    assert field in [c["field"] for c in status["details"]["causes"]]
    assert field in status["message"] and words in status["message"]
    assert status["message"].startswith('DynamoGraphDeployment.nvidia.com "bad" is invalid: ')
    with pytest.raises(ApiException):
        get(custom, namespace, "bad")


def test_unknown_field_rejected_strictly_or_pruned_on_request(custom, namespace):
    body = dgd("unknown")
    body["spec"]["replicaz"] = 3
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert err.value.status == 400 and 'unknown field "spec.replicaz"' in _status_of(err.value)["message"]
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body, field_validation="Ignore")
    assert "replicaz" not in created["spec"]


def test_v1alpha1_dgd_is_validated_against_its_own_schema(custom, namespace):
    body = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "old"},
            "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": "one"}}}}
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL, body)
    assert err.value.status == 422 and "spec.services.Frontend.replicas" in err.value.body
    body["spec"]["services"]["Frontend"]["replicas"] = 1
    created = custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL, body)
    assert created["apiVersion"] == "nvidia.com/v1alpha1" and created["metadata"]["generation"] == 1


def test_status_subresource(custom, namespace):
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, dgd("st"))
    # Main-resource writes ignore status.
    body = dgd("st")
    body["status"] = {"state": "failed"}
    apply(custom, namespace, body)
    obj = get(custom, namespace, "st")
    assert (obj.get("status") or {}).get("state") != "failed" or obj["metadata"]["generation"] == 1
    # Status writes go through /status, keep the generation, and are validated too.
    generation = obj["metadata"]["generation"]
    # The write's own answer is the object as stored: the simulated operator may rewrite the status
    # right after, so reading it back again would race with it.
    written = custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "st",
                                                           {"status": {"state": "pending", "observedGeneration": 7}})
    assert written["status"]["observedGeneration"] == 7 and written["status"]["state"] == "pending"
    assert written["metadata"]["generation"] == generation
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "st",
                                                     {"status": {"state": "exploded"}})
    assert err.value.status == 422 and "status.state" in err.value.body
    # A status write cannot change the spec.
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "st",
                                                 {"spec": {"backendFramework": "sglang"}})
    assert get(custom, namespace, "st")["spec"]["backendFramework"] == "vllm"
